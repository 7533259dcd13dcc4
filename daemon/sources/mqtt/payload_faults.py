"""Counting rejected MQTT payloads, and logging them once per episode instead of per message.

Per subscription, the first rejected payload opens an *episode* (one warning, naming the topic
and the reason); the episode closes (one info line, with how many were rejected) at the next
accepted payload once no rejection has been seen for ``quiet_s``. The quiet period matters: two
devices on one filter, one sane and one broken, would otherwise flip the state (and log) on
every message.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from daemon.sources.mqtt.payloads import Rejection
from daemon.sources.mqtt.subscriptions import Subscription

log = logging.getLogger(__name__)


@dataclass
class _Episode:
    last_rejected_at: float
    rejected: int = 0


class PayloadFaults:
    """Rejection counts per subscription, with one log line per change of state."""

    def __init__(self, subscriptions: tuple[Subscription, ...], quiet_s: float = 60.0) -> None:
        self._subscriptions = subscriptions
        self._quiet_s = quiet_s
        self._open: dict[int, _Episode] = {}
        self.rejected = [0] * len(subscriptions)

    @property
    def total(self) -> int:
        """Payloads rejected since the start, over all subscriptions."""
        return sum(self.rejected)

    def reject(self, index: int, topic: str, reason: Rejection, now: float) -> None:
        """Count a rejected payload of subscription ``index``; log if it opens an episode."""
        self.rejected[index] += 1
        episode = self._open.get(index)
        if episode is None:
            episode = self._open[index] = _Episode(now)
            spec = self._subscriptions[index]
            log.warning(
                "mqtt payloads rejected",
                extra={
                    "source": "mqtt",
                    "subscription": spec.topic,
                    "signal": spec.signal,
                    "topic": topic,
                    "reason": reason.value,
                },
            )
        episode.last_rejected_at = now
        episode.rejected += 1

    def accept(self, index: int, now: float) -> None:
        """Note an accepted payload of subscription ``index``; may close its episode."""
        # The common case (no open episode) must stay a single dict lookup.
        episode = self._open.get(index)
        if episode is None or now - episode.last_rejected_at < self._quiet_s:
            return
        del self._open[index]
        spec = self._subscriptions[index]
        log.info(
            "mqtt payloads accepted again",
            extra={
                "source": "mqtt",
                "subscription": spec.topic,
                "signal": spec.signal,
                "rejected": episode.rejected,
            },
        )
