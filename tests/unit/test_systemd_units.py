"""The systemd unit and the polkit rule, checked with the real tools.

``systemd-analyze`` scores the unit's sandbox and verifies its syntax; ``node`` runs the polkit
rule file the way polkitd does (a ``polkit`` object with ``addRule``, rules asked in order, the
first answer that is not "not handled" wins). Without either program the tests skip, or fail
when ``CI=true``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from daemon.app.defaults import EXIT_CONFIG, EXIT_DEADLINE
from daemon.core.settings import ControlSection, GovernorSection
from tests.support.services import require_command

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "systemd" / "vllm-governor.service"
RULES = ROOT / "systemd" / "50-vllm-governor.rules"
EXEC_START = (
    "/opt/vllm-governor/.venv/bin/vllm-governor run --config /etc/vllm-governor/config.toml"
)
MAX_EXPOSURE = 2.0


def run(argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run a checker without colours or a pager, capturing everything it says."""
    env = {**os.environ, "SYSTEMD_COLORS": "0", "SYSTEMD_PAGER": "", "NO_COLOR": "1"}
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """Section -> key -> every value assigned, in order (unit files repeat keys)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        assert not line.endswith("\\"), f"line {number}: continuation lines are not parsed here"
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"line {number}: assignment outside a section"
        key, separator, value = line.partition("=")
        assert separator, f"line {number}: not a key=value line: {raw!r}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


_TIMESPAN_UNITS = {
    "us": 1e-6,
    "ms": 1e-3,
    "": 1.0,
    "s": 1.0,
    "sec": 1.0,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
}


def timespan_seconds(value: str) -> float:
    """A systemd time span such as ``30s``, ``1min 30s`` or ``90`` (seconds) in seconds."""
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", value)
    assert parts, f"not a time span: {value!r}"
    assert re.fullmatch(r"(?:\s*\d+(?:\.\d+)?\s*[a-z]*)+\s*", value), f"odd time span {value!r}"
    return sum(float(number) * _TIMESPAN_UNITS[unit] for number, unit in parts)


@pytest.fixture(scope="module")
def service() -> dict[str, list[str]]:
    return parse_unit(UNIT.read_text())["Service"]


def only(service: dict[str, list[str]], key: str) -> str:
    values = service.get(key, [])
    assert len(values) == 1, f"{key}= should be set exactly once, found {values}"
    return values[0]


# --- systemd-analyze -------------------------------------------------------------------------


def test_security_exposure_is_at_most_two() -> None:
    analyze = require_command("systemd-analyze")
    result = run([analyze, "security", "--offline=yes", "--no-pager", str(UNIT)])
    output = result.stdout + result.stderr
    match = re.search(r"Overall exposure level for vllm-governor\.service: (\d+(?:\.\d+)?)", output)
    assert match is not None, f"no overall exposure in the output:\n{output}"
    exposure = float(match.group(1))
    assert exposure <= MAX_EXPOSURE, f"exposure {exposure} > {MAX_EXPOSURE}:\n{output}"


def verify_copy(tmp_path: Path, text: str) -> tuple[int, str]:
    """``systemd-analyze verify`` on ``text`` saved as a unit of the same name; (status, output).

    verify insists that ExecStart= names an executable file, and the governor's virtual
    environment under /opt is not installed here, so the copy runs ``true`` instead; nothing
    else changes (same file name, hence same unit name and type). ``--recursive-errors=no``
    makes the exit status reflect warnings about this unit only (an unknown key, a value that
    does not parse), not about the host's units it is ordered after.
    """
    analyze = require_command("systemd-analyze")
    stand_in = require_command("true")
    binary = EXEC_START.split(maxsplit=1)[0]
    assert text.count(f"ExecStart={binary} ") == 1
    copy = tmp_path / UNIT.name
    copy.write_text(text.replace(f"ExecStart={binary} ", f"ExecStart={stand_in} "))
    result = run(
        [analyze, "verify", "--man=no", "--generators=no", "--recursive-errors=no", str(copy)],
        cwd=tmp_path,
    )
    return result.returncode, result.stdout + result.stderr


def test_verify_finds_nothing_wrong_with_the_unit(tmp_path: Path) -> None:
    status, output = verify_copy(tmp_path, UNIT.read_text())
    assert [line for line in output.splitlines() if UNIT.name in line] == [], output
    assert status == 0, output


def test_verify_catches_a_misspelt_key(tmp_path: Path) -> None:
    """The check above can fail: the same unit with one key misspelt is reported."""
    text = UNIT.read_text().replace("NotifyAccess=main", "NotifyAcess=main")
    status, output = verify_copy(tmp_path, text)
    assert status != 0, output
    assert "NotifyAcess" in output


# --- what the daemon relies on ---------------------------------------------------------------


def test_unit_runs_the_daemon_as_a_notify_service_under_its_own_user(
    service: dict[str, list[str]],
) -> None:
    assert only(service, "Type") == "notify"
    assert only(service, "NotifyAccess") == "main"
    assert only(service, "ExecStart") == EXEC_START
    assert only(service, "ExecReload") == "/bin/kill -HUP $MAINPID"
    assert only(service, "User") == "vllm-governor"
    assert only(service, "Group") == "vllm-governor"
    assert "DynamicUser" not in service


def test_watchdog_and_restart_policy(service: dict[str, list[str]]) -> None:
    assert timespan_seconds(only(service, "WatchdogSec")) > 0
    assert only(service, "Restart") == "on-failure"
    prevented = " ".join(service.get("RestartPreventExitStatus", [])).split()
    assert str(EXIT_CONFIG) in prevented, "a broken config (78) must not be restarted"
    assert str(EXIT_DEADLINE) not in prevented, "a stop that overran its deadline may restart"


def test_stop_timeout_leaves_room_for_the_graceful_stop(service: dict[str, list[str]]) -> None:
    deadline = GovernorSection().shutdown_deadline_s
    assert timespan_seconds(only(service, "TimeoutStopSec")) > deadline


def test_directories_match_the_configuration_defaults(service: dict[str, list[str]]) -> None:
    assert Path("/var/lib") / only(service, "StateDirectory") == GovernorSection().state_dir
    assert Path("/run") / only(service, "RuntimeDirectory") == ControlSection().socket_path.parent
    assert only(service, "RuntimeDirectoryMode") == "0700"
    assert only(service, "ConfigurationDirectory") == "vllm-governor"
    writable = " ".join(service.get("ReadWritePaths", [])).split()
    assert {"/etc/vllm", "-/etc/vllm"} & set(writable), "the actuator rewrites /etc/vllm"


def test_unit_never_disables_vllm_log_stats() -> None:
    assert "--disable-log-stats" not in UNIT.read_text()


# --- the polkit rule, run by node ------------------------------------------------------------

MANAGE_UNITS = "org.freedesktop.systemd1.manage-units"
YES = "yes"
NOT_HANDLED = None

# (subject user, action id, unit, verb, expected result)
POLKIT_CASES: list[tuple[str, str, str | None, str | None, str | None]] = [
    ("vllm-governor", MANAGE_UNITS, "vllm.service", "restart", YES),
    ("vllm-governor", MANAGE_UNITS, "vllm@main.service", "restart", YES),
    ("vllm-governor", MANAGE_UNITS, "vllm-70b.service", "restart", YES),
    ("vllm-governor", MANAGE_UNITS, "vllm@qwen\\x2d7b.service", "restart", YES),
    ("vllm-governor", MANAGE_UNITS, "vllm@main.service", "start", YES),
    ("vllm-governor", MANAGE_UNITS, "vllm@main.service", "stop", YES),
    ("vllm-governor", MANAGE_UNITS, "vllm@main.service", "try-restart", YES),
    ("vllm-governor", MANAGE_UNITS, "vllm@main.service", "reload", YES),
    ("vllm-governor", MANAGE_UNITS, "vllm@main.service", "reload-or-restart", YES),
    ("vllm-governor", MANAGE_UNITS, "vllm@main.service", "reload-or-try-restart", YES),
    # other units
    ("vllm-governor", MANAGE_UNITS, "sshd.service", "restart", NOT_HANDLED),
    ("vllm-governor", MANAGE_UNITS, "vllm-governor.service", "restart", NOT_HANDLED),
    ("vllm-governor", MANAGE_UNITS, "vllm-governor.service", "stop", NOT_HANDLED),
    ("vllm-governor", MANAGE_UNITS, "vllm-governor@x.service", "restart", NOT_HANDLED),
    ("vllm-governor", MANAGE_UNITS, "foo-vllm.service", "restart", NOT_HANDLED),
    ("vllm-governor", MANAGE_UNITS, "vllm.socket", "restart", NOT_HANDLED),
    ("vllm-governor", MANAGE_UNITS, "vllm.service.bak", "restart", NOT_HANDLED),
    ("vllm-governor", MANAGE_UNITS, "vllmx.service", "restart", NOT_HANDLED),
    ("vllm-governor", MANAGE_UNITS, None, "restart", NOT_HANDLED),
    # verbs the actuator never needs
    ("vllm-governor", MANAGE_UNITS, "vllm.service", "kill", NOT_HANDLED),
    ("vllm-governor", MANAGE_UNITS, "vllm.service", "set-property", NOT_HANDLED),
    ("vllm-governor", MANAGE_UNITS, "vllm.service", "reset-failed", NOT_HANDLED),
    ("vllm-governor", MANAGE_UNITS, "vllm.service", "freeze", NOT_HANDLED),
    ("vllm-governor", MANAGE_UNITS, "vllm.service", None, NOT_HANDLED),
    # other users
    ("alice", MANAGE_UNITS, "vllm.service", "restart", NOT_HANDLED),
    ("root", MANAGE_UNITS, "vllm.service", "restart", NOT_HANDLED),
    ("vllm", MANAGE_UNITS, "vllm.service", "restart", NOT_HANDLED),
    # other actions
    (
        "vllm-governor",
        "org.freedesktop.systemd1.manage-unit-files",
        "vllm.service",
        None,
        NOT_HANDLED,
    ),
    ("vllm-governor", "org.freedesktop.systemd1.reload-daemon", None, None, NOT_HANDLED),
    ("vllm-governor", "org.freedesktop.login1.reboot", None, None, NOT_HANDLED),
]

# polkitd's side: a `polkit` object whose addRule collects functions; for a request the rules
# run in order and the first result other than null/undefined wins (null = not handled).
HARNESS = r"""
"use strict";
const fs = require("fs");
const vm = require("vm");
const [rulesPath, casesPath] = process.argv.slice(2);
const rules = [];
const polkit = {
  Result: {
    NO: "no", YES: "yes", AUTH_SELF: "auth_self", AUTH_SELF_KEEP: "auth_self_keep",
    AUTH_ADMIN: "auth_admin", AUTH_ADMIN_KEEP: "auth_admin_keep", NOT_HANDLED: null,
  },
  addRule(fn) { rules.push(fn); },
  addAdminRule() {},
  log(message) { process.stderr.write(String(message) + "\n"); },
  spawn() { throw new Error("the rule must not spawn programs"); },
};
vm.runInNewContext(fs.readFileSync(rulesPath, "utf8"), { polkit }, { filename: rulesPath });
if (rules.length === 0) throw new Error("the rules file registered no rule");
const results = JSON.parse(fs.readFileSync(casesPath, "utf8")).map((c) => {
  const details = { "polkit.message": "Authentication is required", "polkit.gettext_domain": "systemd" };
  if (c.unit !== null) details.unit = c.unit;
  if (c.verb !== null) details.verb = c.verb;
  const action = { id: c.action, lookup: (key) => details[key] };
  const subject = {
    user: c.user, groups: [c.user], pid: 4242, session: "", seat: "",
    local: false, active: false,
    isInGroup: (group) => group === c.user,
    isInNetGroup: () => false,
  };
  for (const rule of rules) {
    const answer = rule(action, subject);
    if (answer !== null && answer !== undefined) return answer;
  }
  return null;
});
process.stdout.write(JSON.stringify(results));
"""


@pytest.fixture(scope="module")
def polkit_answers(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Any]:
    """Every case of POLKIT_CASES answered by the real rule file, in one node process."""
    node = require_command("node")
    work = tmp_path_factory.mktemp("polkit")
    harness = work / "harness.js"
    harness.write_text(HARNESS)
    cases = work / "cases.json"
    cases.write_text(
        json.dumps(
            [
                {"user": user, "action": action, "unit": unit, "verb": verb}
                for user, action, unit, verb, _ in POLKIT_CASES
            ]
        )
    )
    result = run([node, str(harness), str(RULES), str(cases)])
    assert result.returncode == 0, result.stdout + result.stderr
    answers = json.loads(result.stdout)
    assert isinstance(answers, list)
    assert len(answers) == len(POLKIT_CASES)
    return dict(enumerate(answers))


@pytest.mark.parametrize(
    ("index", "case"),
    list(enumerate(POLKIT_CASES)),
    ids=[f"{user}-{verb}-{unit or action}" for user, action, unit, verb, _ in POLKIT_CASES],
)
def test_polkit_rule(
    polkit_answers: dict[int, Any],
    index: int,
    case: tuple[str, str, str | None, str | None, str | None],
) -> None:
    *_, expected = case
    assert polkit_answers[index] == expected


def test_polkit_rule_never_denies_outright(polkit_answers: dict[int, Any]) -> None:
    """Only YES or not handled: a NO would override the admin's other rules."""
    assert set(polkit_answers.values()) <= {YES, NOT_HANDLED}


def test_polkit_rule_is_plain_ecmascript_5() -> None:
    """polkitd runs rules in Duktape (ES5.1): no let/const, arrow functions or template strings."""
    code = "\n".join(
        line for line in RULES.read_text().splitlines() if not line.lstrip().startswith("//")
    )
    assert re.search(r"\b(let|const|class)\s", code) is None
    assert "=>" not in code
    assert "`" not in code
