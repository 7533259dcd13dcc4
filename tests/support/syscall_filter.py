"""Run a command with some system calls failing with EPERM, as the governor's systemd unit does.

``systemd/vllm-governor.service`` denies the resource-tuning calls
(``SystemCallFilter=~@privileged @resources`` with ``SystemCallErrorNumber=EPERM``). This
wrapper installs the same kind of seccomp filter with ``prctl`` and then executes the command,
so a test can check that the daemon's own children cope, with no systemd needed::

    python -m tests.support.syscall_filter setpriority setrlimit -- python -m some.module

The filter (classic BPF) answers EPERM for the named calls and allows every other one; it is
inherited by every child and cannot be lifted. x86_64 only: elsewhere :func:`supported` is
false.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys

# x86_64 system call numbers (arch/x86/entry/syscalls/syscall_64.tbl) of the @resources set.
SYSCALLS = {
    "setpriority": 141,
    "setrlimit": 160,
    "sched_setparam": 142,
    "sched_setscheduler": 144,
    "sched_setaffinity": 203,
    "sched_setattr": 314,
    "ioprio_set": 251,
}
_AUDIT_ARCH_X86_64 = 0xC000003E
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO_EPERM = 0x00050000 | 1
_LD_W_ABS, _JEQ_K, _RET_K = 0x20, 0x15, 0x06


def supported() -> bool:
    """Whether this machine can run the wrapper (Linux on x86_64)."""
    return sys.platform == "linux" and platform.machine() == "x86_64"


def _program(numbers: list[int]) -> bytes:
    """allow unless arch is x86_64 and the call is one of ``numbers``; then EPERM."""
    count = len(numbers)
    code = [
        (_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_JEQ_K, 0, count + 2, _AUDIT_ARCH_X86_64),  # another arch: allow
        (_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    for index, number in enumerate(numbers):
        # Match: jump over the remaining tests and the allow, to the EPERM.
        code.append((_JEQ_K, count - index, 0, number))
    code += [(_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, _RET_ERRNO_EPERM)]
    return b"".join(struct.pack("HBBI", *instruction) for instruction in code)


def _install(names: list[str]) -> None:
    program = _program([SYSCALLS[name] for name in names])
    length = len(program) // 8
    buffer = ctypes.create_string_buffer(program)

    class SockFprog(ctypes.Structure):
        _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))

    fprog = SockFprog(length, ctypes.addressof(buffer))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


def main() -> None:
    """``NAME... -- COMMAND...``: install the filter, then become the command."""
    arguments = sys.argv[1:]
    split = arguments.index("--")
    _install(arguments[:split])
    command = arguments[split + 1 :]
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
