"""The ``[fleet]`` section of ``config.toml``: this governor as one member of a fleet on etcd.

Off by default: a governor without the section, or with ``enabled = false``, works alone
exactly as it always has. On, it registers its vLLM instances in etcd under a lease and
honours the fleet's freezes; when etcd cannot be read it restarts nothing (see
``docs/fleet.md``).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from daemon.core.secret_patterns import refuse_credentials

# Host and group names become parts of etcd keys and of what `fleet status` prints: plain.
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
# A disruption budget: a count of replicas ("1", 2) or a share of the group ("25%").
Budget = int | str
_PERCENT = re.compile(r"^(\d{1,3})%$")


def budget_problem(budget: Budget) -> str:
    """Why ``budget`` is not a usable ``max_unavailable``; "" when it is."""
    if isinstance(budget, int):
        return "" if budget >= 1 else f"{budget} must be at least 1 (a count of replicas)"
    match = _PERCENT.match(budget)
    if match is None or not 1 <= int(match[1]) <= 100:
        return f'{budget!r} must be a count (1, 2...) or a share from 1% to 100% ("25%")'
    return ""


def budget_slots(budget: Budget, members: int) -> int:
    """The restarts a group of ``members`` replicas may have at once under ``budget``.

    A share is of the replicas registered now, rounded up as Kubernetes rounds a
    PodDisruptionBudget's ``maxUnavailable``; never fewer than one slot, so a group can always
    make progress one replica at a time.
    """
    if isinstance(budget, int):
        return budget
    share = int(budget.removesuffix("%"))
    return max(1, -(-share * members // 100))


def plain_name(text: str) -> bool:
    """Whether ``text`` may be a host or group name (it becomes part of an etcd key)."""
    return bool(_PLAIN_NAME.match(text))


class FleetSection(BaseModel):
    """``[fleet]``: where etcd is, who this governor is, and its instances' groups."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False
    endpoints: tuple[str, ...] = ("http://127.0.0.1:2379",)
    prefix: str = "/vllm-governor/"
    host: str = ""
    groups: dict[str, str] = {}
    max_unavailable: Budget = 1
    group_max_unavailable: dict[str, Budget] = {}
    slot_wait_s: Annotated[float, Field(ge=0, le=3600, allow_inf_nan=False)] = 60.0
    lease_ttl_s: Annotated[int, Field(ge=2, le=3600)] = 15
    refresh_s: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 5.0
    request_timeout_s: Annotated[float, Field(gt=0, le=60, allow_inf_nan=False)] = 2.0

    @field_validator("endpoints")
    @classmethod
    def _http_endpoints(cls, endpoints: tuple[str, ...]) -> tuple[str, ...]:
        if not endpoints:
            message = "name at least one etcd member (http://HOST:PORT)"
            raise ValueError(message)
        for url in endpoints:
            if not url.startswith(("http://", "https://")):
                message = f"{url!r} must be an http:// or https:// URL (etcd's client URL)"
                raise ValueError(message)
            refuse_credentials(url)
        return tuple(url.rstrip("/") for url in endpoints)

    @field_validator("prefix")
    @classmethod
    def _key_prefix(cls, prefix: str) -> str:
        if not prefix.startswith("/") or not prefix.endswith("/") or "//" in prefix:
            message = "must start and end with / (e.g. /vllm-governor/), without empty parts"
            raise ValueError(message)
        return prefix

    @field_validator("host")
    @classmethod
    def _plain_host(cls, host: str) -> str:
        if host and not plain_name(host):
            message = "must be a plain name (letters, digits, . _ -), or empty: the host's name"
            raise ValueError(message)
        return host

    @field_validator("groups")
    @classmethod
    def _plain_groups(cls, groups: dict[str, str]) -> dict[str, str]:
        for instance, group in groups.items():
            if not plain_name(group):
                message = f"group {group!r} of {instance!r} must be a plain name"
                raise ValueError(message)
        return groups

    @field_validator("max_unavailable")
    @classmethod
    def _usable_budget(cls, budget: Budget) -> Budget:
        if problem := budget_problem(budget):
            raise ValueError(problem)
        return budget

    @field_validator("group_max_unavailable")
    @classmethod
    def _usable_group_budgets(cls, budgets: dict[str, Budget]) -> dict[str, Budget]:
        for group, budget in budgets.items():
            if not plain_name(group):
                message = f"group {group!r} must be a plain name"
                raise ValueError(message)
            if problem := budget_problem(budget):
                message = f"{group}: {problem}"
                raise ValueError(message)
        return budgets

    @model_validator(mode="after")
    def _renewed_in_time(self) -> FleetSection:
        # Three renewals per lease: one lost or slow renewal must not let the lease expire.
        if self.refresh_s * 3 > self.lease_ttl_s:
            message = (
                f"refresh_s ({self.refresh_s:g}) must be at most a third of lease_ttl_s "
                f"({self.lease_ttl_s}), so that one missed renewal does not end the lease"
            )
            raise ValueError(message)
        return self

    def budget_of(self, group: str) -> Budget:
        """The ``max_unavailable`` of ``group``: its own, else the fleet's default."""
        return self.group_max_unavailable.get(group, self.max_unavailable)

    def group_of(self, instance: str) -> str:
        """The group an instance belongs to: as configured, else its own name."""
        return self.groups.get(instance, instance)
