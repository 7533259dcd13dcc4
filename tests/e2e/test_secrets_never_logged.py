"""Secrets reach the daemon through the environment or systemd credentials, never its logs."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from daemon.app.control_client import call_daemon
from tests.support.daemon import running_daemon, write_config

BOT_TOKEN = "xoxb-1234567890-never-log-me"
APP_TOKEN = "xapp-1-A0000-never-log-me-either"
SIGNING_SECRET = "8f14e45fceea167a5a36dedd4bea2543"
PASSWORD = "hunter2-never-log-me"
SECRET_LINE = "for: s3cr3t-never-log-me"


def test_secrets_from_env_and_credentials_stay_out_of_logs_and_status(short_tmp: Path) -> None:
    credentials = short_tmp / "credentials"
    credentials.mkdir()
    (credentials / "slack_signing_secret").write_text(SIGNING_SECRET)
    config = write_config(short_tmp, extra='[slack]\nenabled = true\nchannel = "C0TEST"\n')
    env = {
        "VLLM_GOVERNOR_SLACK_BOT_TOKEN": BOT_TOKEN,
        "VLLM_GOVERNOR_SLACK_APP_TOKEN": APP_TOKEN,
        "CREDENTIALS_DIRECTORY": str(credentials),
    }
    with running_daemon(config, env=env) as daemon:
        daemon.wait_for("READY=1")
        status = call_daemon(short_tmp / "control.sock", "status")
        daemon.signal(signal.SIGHUP)
        daemon.wait_for("RELOADING=1")
        daemon.wait_for("READY=1")
        daemon.signal(signal.SIGTERM)
        assert daemon.process.wait(timeout=10) == 0
    everything = daemon.log_text() + repr(status) + "".join(daemon.messages)
    assert daemon.log_records(), "the daemon logged nothing, so this test would prove nothing"
    for secret in (BOT_TOKEN, APP_TOKEN, SIGNING_SECRET):
        assert secret not in everything


def test_a_secret_written_into_the_config_is_refused_without_echoing_it(short_tmp: Path) -> None:
    config = write_config(short_tmp, extra=f'[slack]\nbot_token = "{BOT_TOKEN}"\n')
    result = subprocess.run(
        [sys.executable, "-m", "daemon.app.cli", "check", "--config", str(config)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 78
    assert "slack.bot_token: secrets are never read from the config file" in result.stdout
    assert "VLLM_GOVERNOR_SLACK_BOT_TOKEN" in result.stdout
    assert BOT_TOKEN not in result.stdout + result.stderr


def _check(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daemon.app.cli", "check", "--config", str(config)],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize(
    ("section", "extra"),
    [
        ("slack.channel", f'[slack]\nchannel = "{BOT_TOKEN}"\n'),
        ("slack.http_path", f'[slack]\nhttp_path = "{APP_TOKEN}"\n'),
        ("slack.transport", f'[slack]\ntransport = "{BOT_TOKEN}"\n'),
    ],
)
def test_a_token_pasted_into_any_string_field_is_not_echoed(
    short_tmp: Path, section: str, extra: str
) -> None:
    result = _check(write_config(short_tmp, extra=extra))
    assert result.returncode == 78
    assert section in result.stdout
    assert "(redacted)" in result.stdout
    assert "never-log-me" not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("key", "extra"),
    [
        (
            "slack.api_base_url",
            f'[slack]\napi_base_url = "https://bot:{PASSWORD}@slack.example/api/"\n',
        ),
        (
            "sources.prometheus.url",
            f'[sources.prometheus]\nurl = "http://admin:{PASSWORD}@127.0.0.1:9090"\n',
        ),
        (
            "vllm.0.url",
            f'[[vllm]]\nname = "a"\nurl = "http://u:{PASSWORD}@127.0.0.1:8000"\n',
        ),
    ],
)
def test_a_url_with_credentials_is_refused_without_echoing_them(
    short_tmp: Path, key: str, extra: str
) -> None:
    result = _check(write_config(short_tmp, extra=extra))
    assert result.returncode == 78
    assert f"{key}: must not hold credentials" in result.stdout
    assert PASSWORD not in result.stdout + result.stderr


def test_a_policy_symlink_leaving_the_directory_is_refused_unread(short_tmp: Path) -> None:
    secret_file = short_tmp / "secret.conf"
    secret_file.write_text(SECRET_LINE + "\n")
    policies = short_tmp / "policies"
    policies.mkdir()
    (policies / "x.yaml").symlink_to(secret_file)
    config = write_config(short_tmp)
    text = config.read_text().replace("policy_dirs = []", f'policy_dirs = ["{policies}"]')
    config.write_text(text)

    checked = _check(config)
    assert checked.returncode == 78
    assert "x.yaml" in checked.stdout
    assert "symlink" in checked.stdout
    assert "never-log-me" not in checked.stdout + checked.stderr

    with running_daemon(config) as daemon:
        daemon.wait_for("READY=1")
        status = call_daemon(short_tmp / "control.sock", "status")
        daemon.signal(signal.SIGTERM)
        assert daemon.process.wait(timeout=10) == 0
    assert "x.yaml" in repr(status)
    assert "x.yaml" in daemon.log_text()
    assert "never-log-me" not in daemon.log_text() + repr(status)
