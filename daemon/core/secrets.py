"""Secrets: read from the environment or systemd credentials, never from ``config.toml``.

Each secret has a field name here, an environment variable ``VLLM_GOVERNOR_<FIELD>`` and a
systemd credential of the same name as the field (``LoadCredential=slack_bot_token:...``),
which systemd exposes as a file under ``$CREDENTIALS_DIRECTORY``. Values are ``SecretStr``,
which prints as ``**********``, so they cannot reach a log line by accident.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from daemon.core.errors import SecretError

ENV_PREFIX = "VLLM_GOVERNOR_"


class GovernorSecrets(BaseSettings):
    """The secrets the governor may need; each is optional until a feature asks for it."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    slack_bot_token: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    mqtt_password: SecretStr | None = None

    def values(self) -> list[str]:
        """Every secret value that is set, for the log redactor. Handle with care."""
        found = []
        for name in type(self).model_fields:
            secret = getattr(self, name)
            if isinstance(secret, SecretStr) and secret.get_secret_value():
                found.append(secret.get_secret_value())
        return found


SECRET_FIELDS = frozenset(GovernorSecrets.model_fields)


def secret_hint(field: str) -> str:
    """Where to put a secret instead of the config file."""
    return (
        f"set {ENV_PREFIX}{field.upper()} in the environment or a systemd credential named {field}"
    )


def load_secrets() -> GovernorSecrets:
    """Read secrets from the environment and ``$CREDENTIALS_DIRECTORY`` (the environment wins)."""
    credentials = os.environ.get("CREDENTIALS_DIRECTORY")
    secrets_dir = Path(credentials) if credentials else None
    if secrets_dir is not None and not secrets_dir.is_dir():
        message = f"CREDENTIALS_DIRECTORY={secrets_dir} is not a readable directory"
        raise SecretError(message)
    try:
        return GovernorSecrets(_secrets_dir=secrets_dir)
    except ValidationError as exc:
        fields = ", ".join(str(error["loc"][0]) for error in exc.errors(include_input=False))
        message = f"could not read secrets: {fields}"
        raise SecretError(message) from None
