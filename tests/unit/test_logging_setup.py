from __future__ import annotations

import json
import logging

import pytest

from daemon.app.logging_setup import REDACTED, JsonFormatter, SecretRedactor, TextFormatter


def _record(msg: str, *args: object, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("daemon.x", logging.INFO, __file__, 1, msg, args, None)
    record.__dict__.update(extra)
    return record


def test_json_lines_carry_extra_fields() -> None:
    line = JsonFormatter().format(_record("reloaded %s", "ok", path="/etc/x", count=2))
    document = json.loads(line)
    assert document["msg"] == "reloaded ok"
    assert (document["level"], document["logger"]) == ("info", "daemon.x")
    assert (document["path"], document["count"]) == ("/etc/x", 2)
    assert document["ts"].endswith("+00:00")


def test_text_lines_append_extra_fields() -> None:
    assert (
        TextFormatter().format(_record("hello", task="evaluator")).endswith("hello task=evaluator")
    )


@pytest.mark.parametrize("formatter", [JsonFormatter(), TextFormatter()])
def test_redactor_removes_secrets_from_messages_arguments_and_fields(
    formatter: logging.Formatter,
) -> None:
    secret = "xoxb-super-secret"
    record = _record("token %s leaked", secret, detail=f"in {secret} too")
    assert SecretRedactor([secret, ""]).filter(record)
    rendered = formatter.format(record)
    assert secret not in rendered
    assert rendered.count(REDACTED) == 2


def test_redactor_removes_the_userinfo_of_urls_even_without_known_secrets() -> None:
    record = _record("GET %s", "https://bot:hunter2@slack.example/api/x", url="http://u:p@h/")
    assert SecretRedactor([]).filter(record)
    rendered = JsonFormatter().format(record)
    assert "hunter2" not in rendered
    assert "u:p@" not in rendered
    assert "https://…(redacted)@slack.example/api/x" in json.loads(rendered)["msg"]


def test_redactor_never_raises_on_arguments_that_do_not_fit() -> None:
    record = _record("two %s %s", "https://u:hunter2@h/")
    assert SecretRedactor([]).filter(record)
    rendered = JsonFormatter().format(record)
    assert "arguments that do not fit" in rendered
    assert "hunter2" not in rendered
