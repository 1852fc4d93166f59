"""Leases on the emulated clusters' namespaces: what a killed run leaves is removed by the next
cluster, and nothing a running cluster (or anyone else) holds is touched.

The tests that create namespaces need root and iproute2 and are skipped without them; each one
deletes what it made, whatever happens. Their leases live in a folder of the test's own, so that
another run's reaper on the machine leaves their namespaces alone, and they assert on their own
namespaces only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import network_namespaces

from profilers import netns_leases
from profilers.netns import delete_namespaces, run_ip
from profilers.netns_cluster import emulated_cluster
from profilers.netns_leases import Reaped, cluster_lease, reap_abandoned
from simcore.errors import ProfilingError


@pytest.fixture
def private_leases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Leases in a folder of this test's: another run's reaper on the machine finds no lease
    for this test's namespaces and leaves them alone (it names them as unowned, at most)."""
    folder = tmp_path / "leases"
    monkeypatch.setattr(netns_leases, "LEASE_DIR", folder)
    return folder


def killed_cluster(leases: Path, nodes: int, *, child: bool = False) -> list[str]:
    """Start a process that creates a cluster with its leases in ``leases`` (and, with
    ``child``, starts a process inside its first node), then SIGKILL it: its namespaces stay.
    Returns them, the bridge's first."""
    script = (
        "import pathlib, subprocess, sys, time\n"
        "from profilers import netns_leases\n"
        "from profilers.netns_cluster import emulated_cluster\n"
        f"netns_leases.LEASE_DIR = pathlib.Path({str(leases)!r})\n"
        f"with emulated_cluster({nodes}, {{0: 10e6}}) as c:\n"
        + (
            "    subprocess.Popen(['ip', 'netns', 'exec', c.namespaces[0], 'sleep', '120'],"
            " stdout=subprocess.PIPE)\n"
            if child
            else ""
        )
        + "    print(' '.join((c.bridge_namespace, *c.namespaces)), flush=True)\n"
        "    time.sleep(120)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    made = proc.stdout.readline().split()
    proc.kill()
    proc.wait(60)
    return made


@pytest.fixture
def removed_afterwards() -> Iterator[list[str]]:
    """Namespaces a test makes outside this process: deleted at the end, whatever happened."""
    names: list[str] = []
    yield names
    left = set(names) & network_namespaces()
    for name in left:
        with contextlib.suppress(ProfilingError):  # (gone meanwhile: nothing to stop)
            for pid in pids_in(name):
                os.kill(pid, signal.SIGKILL)
    delete_namespaces(sorted(left))


def pids_in(namespace: str) -> list[int]:
    """The processes running in ``namespace`` (``ip netns pids``)."""
    return [int(pid) for pid in run_ip("ip", "netns", "pids", namespace).split()]


def lease_file(namespace: str) -> Path:
    return netns_leases.LEASE_DIR / f"{namespace.split('-')[1]}.lease"


def test_a_killed_runs_namespaces_are_removed_by_the_next_reap(
    root_only: Any, private_leases: Path, removed_afterwards: list[str]
) -> None:
    made = killed_cluster(private_leases, 2)
    removed_afterwards += made
    assert len(made) == 3 and set(made) <= network_namespaces()  # SIGKILL: no cleanup ran
    assert lease_file(made[0]).exists()
    reaped = reap_abandoned()
    assert not set(made) & network_namespaces()
    assert not set(made) & set(reaped.busy + reaped.unowned)
    assert not lease_file(made[0]).exists()


def test_creating_a_cluster_removes_what_a_killed_run_left_and_says_so(
    root_only: Any,
    private_leases: Path,
    removed_afterwards: list[str],
    capfd: pytest.CaptureFixture[str],
) -> None:
    made = killed_cluster(private_leases, 1)
    removed_afterwards += made
    capfd.readouterr()
    with emulated_cluster(1) as cluster:
        assert not set(made) & network_namespaces()
        assert cluster.namespaces[0] in network_namespaces()
    removed = [line for line in capfd.readouterr().err.splitlines() if "removed" in line]
    assert len(removed) == 1 and removed[0].startswith("sgdsim: note: removed 2 ")
    assert all(name in removed[0] for name in made)


def test_a_running_clusters_namespaces_are_left_alone(root_only: Any, private_leases: Path) -> None:
    with emulated_cluster(2, {0: 10e6}) as cluster:
        names = {cluster.bridge_namespace, *cluster.namespaces}
        reaped = reap_abandoned()
        assert not names & set(reaped.removed + reaped.busy + reaped.unowned)
        assert names <= network_namespaces()
        lease = lease_file(cluster.bridge_namespace)
        fd = os.open(lease, os.O_RDWR)
        try:  # the lease is held: nobody else can take it
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    assert not lease.exists()  # given back with the namespaces


def test_namespaces_a_process_still_runs_in_are_left_until_it_exits(
    root_only: Any, private_leases: Path, removed_afterwards: list[str]
) -> None:
    made = killed_cluster(private_leases, 2, child=True)
    removed_afterwards += made
    inside = pids_in(made[1])
    assert len(inside) == 1  # the sleep the killed run started in its first node
    reaped = reap_abandoned()
    assert set(made) <= network_namespaces()
    assert set(made) <= set(reaped.busy)
    os.kill(inside[0], signal.SIGKILL)
    for _ in range(100):  # the kernel reaps the orphan (its parent is gone) within moments
        if not pids_in(made[1]):
            break
        time.sleep(0.05)
    reap_abandoned()
    assert not set(made) & network_namespaces()


def test_namespaces_without_a_lease_are_reported_not_removed(root_only: Any) -> None:
    name = f"sgdsim-{secrets.token_hex(3)}-n0"  # as an sgdsim before leases left them
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        reaped = reap_abandoned()
        assert name in reaped.unowned and name in network_namespaces()
        assert any(name in note and "ip netns del" in note for note in reaped.notes())
    finally:
        delete_namespaces([name])


@pytest.mark.skipif(shutil.which("ip") is None, reason="needs iproute2's `ip`")
def test_a_lease_is_held_for_the_block_and_its_file_removed_after(private_leases: Path) -> None:
    tag = secrets.token_hex(3)
    path = private_leases / f"{tag}.lease"
    with cluster_lease(tag):
        fd = os.open(path, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    assert not path.exists()  # no namespace of the tag is left: nothing to reap later


def test_notes_name_every_namespace_and_say_nothing_when_nothing_was_found() -> None:
    assert Reaped().notes() == []
    notes = Reaped(removed=("sgdsim-ab-br", "sgdsim-ab-n0"), busy=("sgdsim-cd-n0",)).notes()
    assert len(notes) == 2
    assert notes[0].startswith("removed 2 network namespaces") and "sgdsim-ab-n0" in notes[0]
    assert "sgdsim-cd-n0" in notes[1] and "still use" in notes[1]
