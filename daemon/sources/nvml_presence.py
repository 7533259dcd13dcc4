"""Is there an NVML library to talk to? Asked before the binding is imported.

nvidia-ml-py is one large module (about 18 MB of memory once imported, measured with
``bench/idle_footprint.py``'s method), which a host without an NVIDIA driver should not pay
for. Opening the library the way the binding would (by soname, or by the configured path)
tells whether the binding could work at all.
"""

from __future__ import annotations

import ctypes

SONAME = "libnvidia-ml.so.1"


def nvml_library_missing(library_path: str | None) -> str | None:
    """None when the NVML library can be loaded; otherwise why not, in the loader's words."""
    try:
        # RTLD_GLOBAL, as the binding's own preload needs: a library loaded by path is then the
        # one the binding finds by its soname.
        ctypes.CDLL(library_path or SONAME, mode=ctypes.RTLD_GLOBAL)
    except OSError as exc:
        return str(exc)
    return None
