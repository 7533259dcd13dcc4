from __future__ import annotations

from pathlib import Path

import pytest

from daemon.core.errors import ConfigIssue
from daemon.core.secret_patterns import masked, refuse_credentials, without_userinfo


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("got 'xoxb-123-456-abcdef'", "got 'xoxb-…(redacted)'"),
        ("xoxp-1-2 and xapp-1-A0-xyz", "xoxp-…(redacted) and xapp-…(redacted)"),
        ("https://bot:hunter2@slack.example/api/", "https://…(redacted)@slack.example/api/"),
        ("key 8f14e45fceea167a5a36dedd4bea2543 here", "key …(redacted) here"),
        ("dGhpcyBpcyBhIGZha2Ugc2VjcmV0IHRva2VuIDEyMw==", "…(redacted)"),
        # Not secrets: ordinary words, channel ids, paths, URLs without userinfo.
        ("must be a channel ID such as C0123ABCD", "must be a channel ID such as C0123ABCD"),
        ("/var/lib/vllm-governor/policies/x.yaml", "/var/lib/vllm-governor/policies/x.yaml"),
        ("http://127.0.0.1:8000/metrics", "http://127.0.0.1:8000/metrics"),
        ("'kv_pressure_scale_down_v2_for_gpu0_x'", "'kv_pressure_scale_down_v2_for_gpu0_x'"),
        ("AKIAIOSFODNN7EXAMPLEwJalrXUtnFEMI2K7MDENG", "…(redacted)"),
        (
            "a_very_long_identifier_without_any_digits_at_all",
            "a_very_long_identifier_without_any_digits_at_all",
        ),
    ],
)
def test_masked(text: str, expected: str) -> None:
    assert masked(text) == expected


def test_without_userinfo_leaves_digests_alone() -> None:
    digest = "8f14e45fceea167a5a36dedd4bea2543"
    assert without_userinfo(f"http://a:b@h/{digest}") == f"http://…(redacted)@h/{digest}"


def test_refuse_credentials_never_quotes_the_url() -> None:
    assert refuse_credentials("https://slack.example/api/") == "https://slack.example/api/"
    with pytest.raises(ValueError, match="must not hold credentials") as raised:
        refuse_credentials("https://bot:hunter2@slack.example/api/")
    assert "hunter2" not in str(raised.value)


def test_config_issues_never_carry_a_secret_looking_value() -> None:
    issue = ConfigIssue(Path("c.toml"), 1, 1, "slack.channel", "bad (got 'xoxb-1-2-abc')")
    assert issue.render() == "c.toml:1:1: slack.channel: bad (got 'xoxb-…(redacted)')"
