"""The admission gates in ``vllm-governor status``: cap, max-num-seqs, who steers, why it holds."""

from __future__ import annotations

from typing import Any


def gate_lines(status: dict[str, Any]) -> list[str]:
    """One line per gate, and its last change; nothing when no instance has a gate."""
    gates: dict[str, dict[str, Any]] = status.get("gates") or {}
    if not gates:
        return []
    lines = ["admission gates:"]
    for target, gate in gates.items():
        cap = "?" if gate.get("cap") is None else f"{gate['cap']:g}"
        ceiling = "?" if gate.get("max_num_seqs") is None else f"{gate['max_num_seqs']:g}"
        steering = (
            f"steered by {gate['policy']} ({gate['controller']})"
            if gate.get("policy")
            else "no admission policy fires"
        )
        held = f"; {gate['hold']}" if gate.get("hold") else ""
        lines.append(f"  {target:<10} cap {cap} of max-num-seqs {ceiling}, {steering}{held}")
        if gate.get("last_step"):
            lines.append(f"    last step: {gate['last_step']}")
        if last := gate.get("last_change"):
            lines.append(
                f"    last change: {last['state']} by {last['policy']} at {last['at']}: "
                f"{last['outcome']}"
            )
    return lines
