"""A stub ``libnvidia-ml.so.1`` compiled from C, and the state file that drives it.

The real nvidia-ml-py binding loads the stub exactly as it would load NVIDIA's library: by
the soname ``libnvidia-ml.so.1``, found either because it is already loaded in the process
(preloaded by path) or through ``LD_LIBRARY_PATH`` in a fresh process. See ``nvml_stub.c`` for
the state keys.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

from tests.support.services import require_command

SOURCE = Path(__file__).with_name("nvml_stub.c")
SONAME = "libnvidia-ml.so.1"


def build_stub(directory: Path, omit: tuple[str, ...] = ()) -> Path:
    """Compile the stub into ``directory/libnvidia-ml.so.1`` and return that path.

    ``omit`` names symbols to leave out of the library (``"ECC"``, ``"CLOCK_EVENTS"``: see the
    C file), as an older or smaller driver would.
    """
    gcc = require_command("gcc")
    directory.mkdir(parents=True, exist_ok=True)
    library = directory / SONAME
    defines = [f"-DOMIT_{name}" for name in omit]
    command = [gcc, "-Wall", "-Wextra", "-Werror", "-O1", "-shared", "-fPIC", *defines]
    command += [f"-Wl,-soname,{SONAME}", "-o", str(library), str(SOURCE)]
    subprocess.run(command, check=True, capture_output=True, text=True)
    return library


class StubState:
    """The stub's state file; every change is visible to the stub's next call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.values: dict[str, str] = {}

    def set(self, values: Mapping[str, object]) -> None:
        """Add or change keys, then write the file atomically (the stub may be reading it)."""
        self.values.update({key: str(value) for key, value in values.items()})
        text = "".join(f"{key}={value}\n" for key, value in self.values.items())
        scratch = self.path.with_suffix(".new")
        scratch.write_text(text)
        scratch.replace(self.path)
