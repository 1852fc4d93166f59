"""Shared fixtures, and the ``slow`` mark on whole modules (see tests/README.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from profilers import netns_cluster
from profilers.netns import check_permitted
from profilers.netns_leases import list_namespaces
from simcore.errors import ConfigError

from figure_capture import FigureRecord, record

# Modules whose every test starts torch processes, builds full-size models or runs the profiler
# on them, or creates network namespaces: seconds each, and a minute or more on a busy machine.
# The scenario modules (test_scenario_*.py) run a whole scenario script, simulations and figures.
# Slow tests elsewhere carry @pytest.mark.slow themselves.
SLOW_MODULES = frozenset(
    {
        "test_cli_profile.py",
        "test_distributed_runner.py",
        "test_distributed_validate.py",
        "test_models.py",
        "test_netns_cluster.py",
        "test_profiler.py",
        "test_profiler_scripts.py",
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``slow`` every test of SLOW_MODULES and the scenario modules, and every test that
    creates network namespaces (the ``root_only`` or ``namespaces_made`` fixture)."""
    for item in items:
        name = item.path.name
        fixtures = set(getattr(item, "fixturenames", ()))
        if (
            name in SLOW_MODULES
            or name.startswith("test_scenario_")
            or {"root_only", "namespaces_made"} & fixtures
        ):
            item.add_marker(pytest.mark.slow)


def network_namespaces() -> set[str]:
    """The names ``ip netns list`` shows."""
    return set(list_namespaces())


@pytest.fixture
def namespaces_made(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The network namespaces this process's emulated clusters create during the test; afterwards,
    assert that none of them is left.

    Only its own: other processes on the machine (a test run beside this one) create and delete
    theirs meanwhile, so the machine's list before and after may differ either way.
    """
    made: list[str] = []
    original = netns_cluster.run_ip

    def run_ip(*cmd: str) -> None:
        original(*cmd)
        if cmd[:3] == ("ip", "netns", "add"):
            made.append(cmd[3])

    monkeypatch.setattr(netns_cluster, "run_ip", run_ip)
    yield made
    if made:  # (without any, `ip` may not even exist here)
        assert not set(made) & network_namespaces()


@pytest.fixture
def root_only(namespaces_made: list[str]) -> None:
    """Skip unless network namespaces can be made here; afterwards, assert that the test left
    none of those it made behind (``namespaces_made``)."""
    try:
        check_permitted()
    except ConfigError as err:
        pytest.skip(f"emulated cluster not possible here: {err}")


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
