"""The governor's own batch traffic on one server: what it has in flight, and what it was served.

vLLM's metrics count every request alike; only the governor knows which are its own. It keeps
the count of its batch requests in flight and, for each answered one, when it ended and the
tokens vLLM's answer says it used (``usage.prompt_tokens``, ``usage.completion_tokens``, in
every completion and chat completion answer). Rates are read over the same window as the
policies' signals, to be taken out of vLLM's own (:mod:`daemon.policy.online_signals`).

A request cancelled before its answer (the lane narrowed) is not counted: vLLM has counted
the tokens it generated for it, which the governor cannot know; the error is on the side of
online traffic looking a little busier than it is, never quieter.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from typing import Any

# Answers kept: enough for the longest window at the highest batch rate worth counting.
MAX_ANSWERS = 65_536


@dataclass(frozen=True, slots=True)
class OwnTraffic:
    """The governor's batch traffic on one server now, and over a window ending now.

    Attributes:
        in_flight: Batch requests sent and not answered.
        requests_per_s: Batch requests answered per second over the window.
        prompt_tokens_per_s: Their prompt tokens per second.
        gen_tokens_per_s: Their generated tokens per second.
        piece_tokens: The lane's prefill pieces (``[batch] prefill_piece_tokens``; 0: none).
    """

    in_flight: int
    requests_per_s: float
    prompt_tokens_per_s: float
    gen_tokens_per_s: float
    piece_tokens: int = 0


class TrafficTally:
    """The answers to one server's batch requests, newest last (bounded)."""

    def __init__(self) -> None:
        self._answers: deque[tuple[float, int, int]] = deque(maxlen=MAX_ANSWERS)

    def answered(self, at: float, usage: tuple[int, int]) -> None:
        """One answer at ``at`` (loop clock), with its (prompt, generated) tokens."""
        self._answers.append((at, *usage))

    def over(
        self, window_s: float, now: float, in_flight: int, piece_tokens: int = 0
    ) -> OwnTraffic:
        """The traffic over ``(now - window_s, now]`` (and the lane's pieces, as set)."""
        start = now - window_s
        inside = [(prompt, gen) for at, prompt, gen in self._answers if start < at <= now]
        return OwnTraffic(
            in_flight=in_flight,
            requests_per_s=len(inside) / window_s,
            prompt_tokens_per_s=sum(prompt for prompt, _ in inside) / window_s,
            gen_tokens_per_s=sum(gen for _, gen in inside) / window_s,
            piece_tokens=piece_tokens,
        )


def usage_of(result_line: bytes) -> tuple[int, int] | None:
    """The (prompt, generated) tokens of a result line's answer; None when it states none."""
    try:
        result: Any = json.loads(result_line)
    except ValueError:
        return None
    response = result.get("response") if isinstance(result, dict) else None
    return usage_in(response.get("body") if isinstance(response, dict) else None)


def usage_in(answer: Any) -> tuple[int, int] | None:
    """The (prompt, generated) tokens of a completion's answer body; None when it states none."""
    usage = answer.get("usage") if isinstance(answer, dict) else None
    if not isinstance(usage, dict):
        return None
    prompt, generated = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(generated, int):
        return None
    return max(prompt, 0), max(generated, 0)
