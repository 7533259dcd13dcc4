"""The approvals' errors.

They are a branch of the governor's tree (:mod:`daemon.core.errors`)::

    GovernorError
    └── ApprovalError               the approval flow was used in a way it does not allow
        ├── ProposalError           a decision cannot become a proposal
        ├── InvalidTransition       a lifecycle step the state machine forbids
        └── UnverifiedRequest       an HTTP interactivity request failed verification

A refused *click* is not an error: it is an ordinary outcome of
:func:`daemon.approvals.state_machine.decide`, with a reason for people.
"""

from __future__ import annotations

from enum import Enum

from daemon.core.errors import GovernorError


class ApprovalError(GovernorError):
    """The approval flow was used in a way it does not allow."""


class ProposalError(ApprovalError):
    """A decision cannot become a proposal (not an accepted intent of an approval-risk policy)."""


class InvalidTransition(ApprovalError):
    """A lifecycle step the state machine forbids, such as applying a rejected proposal."""


class Unverified(Enum):
    """Why an interactivity request was refused."""

    MALFORMED = "malformed"  # headers missing, or not the shape Slack sends
    STALE = "stale"  # its timestamp is outside the five-minute window
    FORGED = "forged"  # the signature does not match the body and timestamp
    REPLAYED = "replayed"  # a request with this signature was already accepted
    OVERLOADED = "overloaded"  # the replay cache is full: refuse rather than forget


class UnverifiedRequest(ApprovalError):
    """An HTTP interactivity request failed verification; ``reason`` says which check."""

    def __init__(self, reason: Unverified, message: str) -> None:
        super().__init__(message)
        self.reason = reason
