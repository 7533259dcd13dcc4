"""``vllm-governor status`` shows each admission gate."""

from __future__ import annotations

from daemon.app.commands.gate_status import gate_lines


def test_no_gate_no_section() -> None:
    assert gate_lines({}) == []
    assert gate_lines({"gates": {}}) == []


def test_a_steered_gate_and_a_held_one() -> None:
    status = {
        "gates": {
            "main": {
                "gate": "/run/haproxy/vllm-governor.sock vllm/main",
                "cap": 12.0,
                "max_num_seqs": 64.0,
                "policy": "admission-cap",
                "controller": "slo-band",
                "hold": "",
                "last_step": "64 -> 12: pressure 3.00 (ttft)",
                "last_change": {
                    "at": "2026-11-29T12:00:00+00:00",
                    "policy": "admission-cap",
                    "state": "applied",
                    "outcome": "cap 64 -> 12",
                },
            },
            "side": {
                "cap": None,
                "max_num_seqs": 32.0,
                "policy": None,
                "hold": "no fresh gate_cap",
            },
        }
    }
    assert gate_lines(status) == [
        "admission gates:",
        "  main       cap 12 of max-num-seqs 64, steered by admission-cap (slo-band)",
        "    last step: 64 -> 12: pressure 3.00 (ttft)",
        "    last change: applied by admission-cap at 2026-11-29T12:00:00+00:00: cap 64 -> 12",
        "  side       cap ? of max-num-seqs 32, no admission policy fires; no fresh gate_cap",
    ]
