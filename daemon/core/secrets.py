"""Secrets: read from the environment or systemd credentials, never from ``config.toml``.

Each secret has a field name here, an environment variable ``VLLM_GOVERNOR_<FIELD>`` (any
case) and a systemd credential of the same name as the field (``LoadCredential=
slack_bot_token:...``), which systemd exposes as a file under ``$CREDENTIALS_DIRECTORY``; the
environment wins, and a credential's surrounding whitespace (a trailing newline) is dropped.
A credential named like the environment variable (``VLLM_GOVERNOR_SLACK_BOT_TOKEN``) is read
too: that is the only name earlier versions found. Values are ``SecretStr``, which prints as
``**********``, so they cannot reach a log line by accident.

Read by hand rather than with pydantic-settings: four optional strings do not need a library
that costs the running daemon some 5 MiB of memory.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError

from daemon.core.errors import SecretError

ENV_PREFIX = "VLLM_GOVERNOR_"


class GovernorSecrets(BaseModel):
    """The secrets the governor may need; each is optional until a feature asks for it."""

    model_config = ConfigDict(extra="ignore", frozen=True)

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
    environment = {name.upper(): value for name, value in os.environ.items()}
    found: dict[str, str] = {}
    for field in SECRET_FIELDS:
        value = environment.get(ENV_PREFIX + field.upper())
        if value is None and secrets_dir is not None:
            value = _credential(secrets_dir, field)
        if value is not None:
            found[field] = value
    try:
        return GovernorSecrets.model_validate(found)
    except ValidationError as exc:
        fields = ", ".join(str(error["loc"][0]) for error in exc.errors(include_input=False))
        message = f"could not read secrets: {fields}"
        raise SecretError(message) from None


def _credential(directory: Path, field: str) -> str | None:
    """The credential of ``field`` in ``directory``, named as the field or as its variable."""
    for name in (field, ENV_PREFIX + field.upper()):
        path = directory / name
        if path.is_file():
            try:
                return path.read_text(encoding="utf-8").strip()
            except (OSError, ValueError) as exc:
                # The reason only (unreadable, not UTF-8): never the file's content.
                message = f"could not read the credential {path}: {type(exc).__name__}"
                raise SecretError(message) from None
    return None
