"""Shared fixtures."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from profilers.netns import check_permitted
from simcore.errors import ConfigError

from figure_capture import FigureRecord, record


def network_namespaces() -> set[str]:
    """The names ``ip netns list`` shows."""
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return {line.split()[0] for line in listing.stdout.splitlines() if line.strip()}


@pytest.fixture
def root_only() -> Iterator[None]:
    """Skip unless network namespaces can be made here; afterwards, assert that the test left
    none behind."""
    try:
        check_permitted()
    except ConfigError as err:
        pytest.skip(f"emulated cluster not possible here: {err}")
    before = network_namespaces()
    yield
    assert network_namespaces() == before


@pytest.fixture
def saved_figures(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FigureRecord]]:
    """Every figure saved during the test, as recorded just before it was written."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    records: list[FigureRecord] = []
    original = Figure.savefig

    def savefig(self: Figure, fname: Any, *args: Any, **kwargs: Any) -> Any:
        records.append(record(self, fname))
        return original(self, fname, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    yield records
