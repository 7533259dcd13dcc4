"""The fleet's errors.

They sit below :class:`~daemon.core.errors.GovernorError`::

    FleetError                  the fleet's coordination could not be done
    ├── EtcdUnavailable         no member of the etcd cluster answered usably (refused, timed
    │                           out, no quorum): the fleet's state is unknown
    └── EtcdAnswerError         etcd answered, but not with what the call needs (an error
                                status, a body that is not the v3 JSON it should be)
"""

from __future__ import annotations

from daemon.core.errors import GovernorError


class FleetError(GovernorError):
    """The fleet's coordination could not be done."""


class EtcdUnavailable(FleetError):
    """No etcd member answered usably: the fleet's state is unknown (fail safe)."""


class EtcdAnswerError(FleetError):
    """etcd answered with an error or a body that is not usable v3 JSON."""
