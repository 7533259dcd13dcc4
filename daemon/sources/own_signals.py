"""The signals of the governor's own batch traffic, per vLLM target.

They are not scraped: the governor counts its own batch requests (:mod:`daemon.batch.own_traffic`)
and adds these where views are built, after taking the same traffic out of vLLM's own
``running``, ``waiting``, ``gen_tokens_per_s`` and ``prompt_tokens_per_s``
(:mod:`daemon.policy.online_signals`). They are declared here so that policies may read them.
"""

from __future__ import annotations

from daemon.sources.declarations import SignalDeclaration, unit_of
from daemon.sources.domains import COUNT, NON_NEGATIVE

BATCH_IN_FLIGHT = "batch_in_flight"
BATCH_REQUESTS_PER_S = "batch_requests_per_s"
BATCH_PROMPT_TOKENS_PER_S = "batch_prompt_tokens_per_s"
BATCH_GEN_TOKENS_PER_S = "batch_gen_tokens_per_s"
BATCH_PIECE_TOKENS = "batch_piece_tokens"

DECLARATIONS = tuple(
    SignalDeclaration(
        name,
        "governor",
        meaning,
        unit_of(name),
        per_target=True,
        declared_domain=domain,
    )
    for name, meaning, domain in [
        (BATCH_IN_FLIGHT, "The governor's batch requests in flight on the server", COUNT),
        (BATCH_REQUESTS_PER_S, "Its batch requests answered per second", NON_NEGATIVE),
        (BATCH_PROMPT_TOKENS_PER_S, "Their prompt tokens per second", NON_NEGATIVE),
        (BATCH_GEN_TOKENS_PER_S, "Their generated tokens per second", NON_NEGATIVE),
        (
            BATCH_PIECE_TOKENS,
            "Tokens a prefill piece of its batch prompts adds (0: prompts go whole)",
            COUNT,
        ),
    ]
)
