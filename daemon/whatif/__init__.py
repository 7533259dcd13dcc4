"""What-if planning: which ``max_num_seqs`` x ``max_num_batched_tokens`` would serve best now.

The recent workload of one vLLM instance is characterised from vLLM's own metrics, with no
request log (:mod:`~daemon.whatif.characterisation`); the summary is turned back into a
synthetic workload (:mod:`~daemon.whatif.synthesis`) and replayed through the simulator with the
instance's engine profile for every candidate setting inside its envelopes, the restart's cost
included (:mod:`~daemon.whatif.planning`). The simulation runs in a worker process with a CPU
bound (:mod:`~daemon.whatif.worker`), never on the daemon's event loop. The profile itself is
checked against the live step rate (:mod:`~daemon.whatif.profile_check`).

Layering: this package sits between the engine (which serves ``whatif`` on the control socket)
and the sources (whose store it reads); it uses the simulator, which knows nothing of it.
"""
