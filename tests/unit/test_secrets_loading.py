"""Secrets come from the environment and from systemd credentials named as the README says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from daemon.core.errors import SecretError
from daemon.core.secrets import load_secrets


def _clear(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET", "MQTT_PASSWORD"):
        monkeypatch.delenv("VLLM_GOVERNOR_" + name, raising=False)
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)


def test_a_credential_named_as_the_field_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README and the unit file: LoadCredential=slack_signing_secret:... (before: not read)."""
    _clear(monkeypatch)
    (tmp_path / "slack_signing_secret").write_text("8f14e45f\n")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    secrets = load_secrets()
    assert secrets.slack_signing_secret is not None
    assert secrets.slack_signing_secret.get_secret_value() == "8f14e45f"


def test_a_credential_named_as_the_variable_is_still_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clear(monkeypatch)
    (tmp_path / "VLLM_GOVERNOR_MQTT_PASSWORD").write_text("hunter2")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    secrets = load_secrets()
    assert secrets.mqtt_password is not None
    assert secrets.mqtt_password.get_secret_value() == "hunter2"


def test_the_environment_wins_in_any_case_and_an_empty_value_is_no_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clear(monkeypatch)
    (tmp_path / "slack_bot_token").write_text("from-file")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    monkeypatch.setenv("VLLM_GOVERNOR_SLACK_BOT_TOKEN", "from-env")
    monkeypatch.setenv("vllm_governor_slack_app_token", "lower-case")
    monkeypatch.setenv("VLLM_GOVERNOR_MQTT_PASSWORD", "")
    secrets = load_secrets()
    assert secrets.slack_bot_token is not None
    assert secrets.slack_bot_token.get_secret_value() == "from-env"
    assert secrets.slack_app_token is not None
    assert secrets.slack_app_token.get_secret_value() == "lower-case"
    assert secrets.slack_signing_secret is None
    assert sorted(secrets.values()) == ["from-env", "lower-case"]
    assert "from-env" not in repr(secrets)


def test_a_missing_directory_or_an_unreadable_credential_is_an_error_without_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clear(monkeypatch)
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path / "absent"))
    with pytest.raises(SecretError, match="not a readable directory"):
        load_secrets()
    (tmp_path / "slack_bot_token").write_bytes(b"\xff\xfe not-utf8-s3cr3t")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    with pytest.raises(SecretError, match="slack_bot_token") as raised:
        load_secrets()
    assert "s3cr3t" not in str(raised.value)


def test_the_running_daemon_does_not_import_pydantic_settings() -> None:
    """Five MiB of memory for four optional strings (issue 15, finding 10)."""
    code = "import sys, daemon.engine.governor; print('pydantic_settings' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "False"
