"""A question answered by one key, without blocking the panel (issue 19, finding 9)."""

from __future__ import annotations

import os
import select
import termios
from collections.abc import Iterator

import pytest

from daemon.app.demo.keys import KeyAsker, TerminalKeys


class ScriptedKeys:
    def __init__(self, *typed: str) -> None:
        self.typed = list(typed)

    def read(self) -> str:
        return self.typed.pop(0) if self.typed else ""


PROPOSAL = {"id": "p1", "policy": "ttft-queue", "target": "main"}


def test_nothing_blocks_until_a_key_answers() -> None:
    asker = KeyAsker(ScriptedKeys("", "", "", "x", "Y"))
    # The first turn asks (keys typed before the question are dropped), the next ones
    # return at once with no answer, so the watch loop goes on redrawing.
    assert [asker(PROPOSAL) for _ in range(4)] == [None, None, None, None]
    assert asker.asking == PROPOSAL
    assert asker(PROPOSAL) is True
    assert asker.asking is None


def test_enter_is_no_and_one_question_at_a_time() -> None:
    asker = KeyAsker(ScriptedKeys("", "\n"))
    assert asker(PROPOSAL) is None
    assert asker({"id": "p2"}) is None  # waits for p1's answer
    assert asker(PROPOSAL) is False


def test_a_proposal_that_is_no_longer_pending_is_not_asked_about() -> None:
    asker = KeyAsker(ScriptedKeys())
    asker(PROPOSAL)
    asker.still_pending({"p2"})
    assert asker.asking is None


@pytest.fixture
def pty() -> Iterator[tuple[int, int]]:
    leader, follower = os.openpty()
    yield leader, follower
    os.close(leader)
    os.close(follower)


def test_a_real_terminal_gives_keys_without_echo_and_gets_its_settings_back(
    pty: tuple[int, int],
) -> None:
    leader, follower = pty
    before = termios.tcgetattr(follower)
    with TerminalKeys(follower) as keys:
        assert keys.read() == ""  # nothing typed: no wait
        os.write(leader, b"y")
        assert select.select([follower], [], [], 10)[0]  # the pty has delivered it
        assert keys.read() == "y"
        assert not termios.tcgetattr(follower)[3] & termios.ECHO
    assert termios.tcgetattr(follower) == before
