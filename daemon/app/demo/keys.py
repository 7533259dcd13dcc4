"""One key at a time from the terminal, without waiting: how the demo asks y or n.

A prompt that blocks on ``input()`` would freeze the live panel until the person answers
(the watch loop runs in the main thread). Instead the terminal is put in cbreak mode (keys
arrive one by one, unechoed; Ctrl-C still interrupts) and each turn of the loop reads the
keys pressed since the last one. The terminal's settings are restored on exit, whatever
happened.
"""

from __future__ import annotations

import os
import select
import sys
import termios
import tty
from typing import Any, Protocol


class Keys(Protocol):
    """Keys pressed since the last read."""

    def read(self) -> str:
        """What was typed since the last call; ``""`` when nothing was."""


class TerminalKeys:
    """The keys of a terminal (stdin's by default), in cbreak mode while the block runs."""

    def __init__(self, fd: int | None = None) -> None:
        self._fd = sys.stdin.fileno() if fd is None else fd
        self._saved: list[Any] | None = None

    def __enter__(self) -> TerminalKeys:
        self._saved = termios.tcgetattr(self._fd)
        tty.setcbreak(self._fd)
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._saved is not None:
            termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)

    def read(self) -> str:
        """Every key pressed since the last read, without waiting."""
        typed = ""
        while select.select([self._fd], [], [], 0)[0]:
            chunk = os.read(self._fd, 64)
            if not chunk:
                break  # end of input: nothing more will come
            typed += chunk.decode(errors="replace")
        return typed


class KeyAsker:
    """Asks about one proposal at a time; answered by ``y`` or ``n`` (Enter is no).

    Args:
        keys: Where the keys come from.

    Attributes:
        asking: The proposal asked about now, or None.
    """

    def __init__(self, keys: Keys) -> None:
        self._keys = keys
        self.asking: dict[str, Any] | None = None

    def __call__(self, proposal: dict[str, Any]) -> bool | None:
        """True (y) or False (n, Enter) once answered; None until then.

        One question at a time: another proposal waits until this one is answered or gone.
        """
        if self.asking is not None and self.asking.get("id") != proposal.get("id"):
            return None
        if self.asking is None:
            self.asking = proposal
            self._keys.read()  # keys pressed before the question are not its answer
            return None
        for key in self._keys.read().lower():
            if key in "yn\r\n":
                self.asking = None
                return key == "y"
        return None

    def still_pending(self, pending_ids: set[str]) -> None:
        """Stop asking about a proposal that is no longer pending (expired, answered)."""
        if self.asking is not None and str(self.asking.get("id")) not in pending_ids:
            self.asking = None
