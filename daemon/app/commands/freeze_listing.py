"""Freezes, pending policies and the last refused reload, as `status` and `freezes` print them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def freeze_lines(freezes: list[dict[str, Any]], indent: str = "  ") -> list[str]:
    """One line per freeze: what, until when, why, by whom."""
    lines = []
    for freeze in freezes:
        what = "every server" if freeze["target"] == "*" else freeze["target"]
        until = f"until {_when(freeze['until'])}" if freeze["until"] else "until its file goes"
        why = f": {freeze['reason']}" if freeze["reason"] else ""
        by = f" (by {freeze['by']})" if freeze["by"] else ""
        lines.append(f"{indent}{what} {until}{why}{by} [{freeze['file']}]")
    return lines


def pending_lines(policies: list[dict[str, Any]], now: float) -> list[str]:
    """Each pending policy and target, with when it fires if its condition keeps holding."""
    lines = []
    for policy in policies:
        for target, state in policy["targets"].items():
            if state.get("phase") != "pending" or state.get("fires_at") is None:
                continue
            verb = "act" if state.get("acts") else "fire"
            left = max(state["fires_at"] - now, 0.0)
            at = datetime.fromtimestamp(state["fires_at"], UTC).strftime("%H:%M:%S UTC")
            lines.append(
                f"  {policy['name']} on {target}: will {verb} in {_seconds(left)} (at {at}) "
                "if the condition keeps holding"
            )
    return lines


def reload_line(status: dict[str, Any]) -> list[str]:
    """The latest refused reload (SIGHUP or policy watcher), and whether it still stands."""
    rejected = status.get("last_rejected_reload")
    if not rejected:
        # A daemon from before ``last_rejected_reload`` says only the standing error.
        error = status.get("last_reload_error")
        return [f"last reload rejected: {error}"] if error else []
    standing = (
        "the configuration in force is the one before it"
        if status.get("last_reload_error")
        else "a later reload succeeded"
    )
    return [
        f"last reload rejected at {rejected['at']} (via {rejected['via']}; {standing}):",
        *(f"  {line}" for line in str(rejected["error"]).splitlines()),
    ]


def _when(iso: str) -> str:
    at = datetime.fromisoformat(iso)
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _seconds(seconds: float) -> str:
    from daemon.policy.testing.timing import format_seconds

    return format_seconds(round(seconds))
