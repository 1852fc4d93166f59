"""Shared fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from figure_capture import FigureRecord, record


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
