"""Where the files that ship with the governor lie, installed or in a checkout.

They are the default policy pack, the example configuration, the systemd unit and the polkit
rule. The repository keeps them at its root (``policies/``, ``config.example.toml``, ``systemd/``),
the one copy anyone edits. The wheel carries them inside this package (``pyproject.toml``,
``[tool.hatch.build.targets.wheel.force-include]``), so an installed governor finds them with
:mod:`importlib.resources`; run from a checkout, or from an editable install of one, this
package holds only this module and the files are found at the source tree's root instead.
Every command that needs one of them asks here, never from a path of its own.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

POLICY_PACK = "policies"
EXAMPLE_CONFIG = "config.example.toml"
SYSTEMD_UNIT = "systemd/vllm-governor.service"
POLKIT_RULE = "systemd/50-vllm-governor.rules"

# What `vllm-governor shipped` lists, in the order an installation uses them.
DESCRIPTIONS = {
    EXAMPLE_CONFIG: "example configuration (copy to /etc/vllm-governor/config.toml)",
    POLICY_PACK: "default policy pack (vllm-governor policies copy DIR to edit it)",
    SYSTEMD_UNIT: "systemd unit (install in /etc/systemd/system/)",
    POLKIT_RULE: "polkit rule (install in /etc/polkit-1/rules.d/)",
}

# A checkout's root is two levels above this package and is told by its pyproject.toml; an
# installed package's parent (site-packages) has none, so a stray top-level folder there of
# the same name is never taken for ours.
_SOURCE_ROOT = Path(__file__).resolve().parents[2]


def shipped_path(name: str) -> Path:
    """The file or directory ``name`` (one of this module's constants) as a path on disk.

    When it is neither in the installed package nor in a source tree, the package's path comes
    back all the same, so that the caller's "no such file" names where it should have been.
    """
    packaged = resources.files(__name__).joinpath(name)
    # A package imported from a zip archive has no paths on disk; the governor is not
    # installed that way (its consumers read directories and hand paths to subprocesses).
    if isinstance(packaged, Path) and packaged.exists():
        return packaged
    source = _SOURCE_ROOT / name
    if (_SOURCE_ROOT / "pyproject.toml").is_file() and source.exists():
        return source
    return Path(str(packaged))


def default_pack() -> Path:
    """The default policy pack's directory."""
    return shipped_path(POLICY_PACK)
