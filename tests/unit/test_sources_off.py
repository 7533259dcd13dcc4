"""``simulate`` and ``backtest`` turn every source off, including one added after them."""

from __future__ import annotations

from daemon.core.settings import HostSourceSection, SourcesSection


class WithAnotherSource(SourcesSection):
    """The settings as they would read once a source is added: one more section."""

    another: HostSourceSection = HostSourceSection()


def test_every_source_section_is_off_whatever_sources_there_are() -> None:
    sources = WithAnotherSource()
    assert sources.another.enabled  # on by default, as every built-in one
    off = sources.all_disabled()
    assert {name: getattr(off, name).enabled for name in WithAnotherSource.model_fields} == {
        "nvml": False,
        "host": False,
        "prometheus": False,
        "mqtt": False,
        "another": False,
    }
