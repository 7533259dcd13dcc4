"""Allow-lists per risk class: users, groups, nobody by default."""

from __future__ import annotations

import pytest

from daemon.approvals.authorisation import AllowList, ApprovalRules
from daemon.approvals.proposal import RiskClass
from tests.unit.approvals.examples import ALICE, BOB, CAROL, MALLORY, RULES, SRE_GROUP, TWO_PERSON


@pytest.mark.parametrize(
    ("risk", "user", "groups", "admitted"),
    [
        (RiskClass.RESTART, ALICE, frozenset(), True),
        (RiskClass.RESTART, BOB, frozenset(), True),
        (RiskClass.RESTART, CAROL, frozenset({SRE_GROUP}), True),
        (RiskClass.RESTART, CAROL, frozenset({"S0OTHER"}), False),
        (RiskClass.RESTART, MALLORY, frozenset(), False),
        (RiskClass.CHANGE, ALICE, frozenset(), True),
        (RiskClass.CHANGE, BOB, frozenset(), False),  # allowed for restarts only
        (RiskClass.CHANGE, CAROL, frozenset({SRE_GROUP}), False),
    ],
)
def test_allow_lists_are_per_risk_class(
    risk: RiskClass, user: str, groups: frozenset[str], admitted: bool
) -> None:
    assert RULES.admits(risk, user, groups) is admitted


def test_nobody_is_allowed_by_default() -> None:
    rules = ApprovalRules()
    assert not rules.admits(RiskClass.CHANGE, ALICE, frozenset({SRE_GROUP}))
    assert not AllowList().admits("", frozenset())


def test_the_two_person_rule_applies_to_the_classes_it_names() -> None:
    assert TWO_PERSON.approvals_needed(RiskClass.RESTART) == 2
    assert TWO_PERSON.approvals_needed(RiskClass.CHANGE) == 1
    assert RULES.approvals_needed(RiskClass.RESTART) == 1
