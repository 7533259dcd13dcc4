"""Policy tests: signal series in, expected decisions out, on a simulated clock.

``vllm-governor test FILE...`` runs test files in the spirit of ``promtool test rules``,
extended to actions, approvals and time travel. The format is described in
``docs/policies.md`` and by ``docs/schemas/policy-test.schema.json``:

* :mod:`~daemon.policy.testing.series` reads promtool's expanding notation (``"0x10 2x20"``);
* :mod:`~daemon.policy.testing.models` is the file format (pydantic, unknown keys refused);
* :mod:`~daemon.policy.testing.suites` turns a file into runnable cases, every problem located
  (:mod:`~daemon.policy.testing.places` says where);
* :mod:`~daemon.policy.testing.world` simulates the governor over one case's timeline;
* :mod:`~daemon.policy.testing.matching` compares what happened with what was expected, and
  :mod:`~daemon.policy.testing.rendering` writes decisions the way a test file does;
* :mod:`~daemon.policy.testing.runner` ties them together for the command line.
"""

from __future__ import annotations
