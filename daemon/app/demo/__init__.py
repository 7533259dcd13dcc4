"""``vllm-governor demo``: the governor retuning a simulated vLLM, then quieting its logs.

The pieces, each in its own module:

- :mod:`~daemon.app.demo.scenario`: what runs (the workload scaled to the duration, the
  starting vLLM YAML, the governor's config.toml);
- :mod:`~daemon.app.demo.children`: the child processes (``sim supervise`` with its
  ``sim serve``, and ``vllm-governor run`` with a datagram ``NOTIFY_SOCKET``) and their stop;
- :mod:`~daemon.app.demo.sampler`: what the daemon's control socket says, twice a second;
- :mod:`~daemon.app.demo.approver`: proposals answered in the terminal, or automatically;
- :mod:`~daemon.app.demo.view`: the live terminal view, or plain lines without a TTY;
- :mod:`~daemon.app.demo.summary`: the run's summary from what the simulated server reported;
- :mod:`~daemon.app.demo.log_volume`: the disk act, the server's log directory against its
  budget, with the governor and without it;
- :mod:`~daemon.app.demo.plot`: the PNG of the run;
- :mod:`~daemon.app.demo.runner`: the whole run, start to stop.
"""
