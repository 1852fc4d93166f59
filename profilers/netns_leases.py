"""Leases on emulated clusters' network namespaces: which are in use, and which a killed run left.

A cluster takes a lease before it creates its namespaces: an exclusive ``flock(2)`` on
``/run/sgdsim/<tag>.lease``, held for the cluster's life and given back after its namespaces are
deleted. The kernel drops the lock when the process dies, SIGKILL included, which no cleanup code
of ours can do. So namespaces ``sgdsim-<tag>-...`` whose lease anyone can take belong to no
running cluster, and the next cluster removes them (:func:`reap_abandoned`) unless a process
still runs inside one (an orphaned rank: left until it exits).

Namespaces of a tag with no lease file were made before leases existed (or by hand): they are
never removed automatically, only reported. ``/run`` is a tmpfs, like ``/run/netns`` where the
namespaces' names live, so a reboot clears both together.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from profilers.netns import delete_namespaces, run_ip
from simcore.errors import SgdsimError

__all__ = ["Reaped", "cluster_lease", "list_namespaces", "reap_abandoned"]

LEASE_DIR = Path("/run/sgdsim")
# A cluster's names: sgdsim-<tag>-br (its bridge) and sgdsim-<tag>-n<i> (node i).
_NAME = re.compile(r"^sgdsim-([0-9a-f]+)-(?:br|n[0-9]+)$")


@dataclass(frozen=True)
class Reaped:
    """What :func:`reap_abandoned` found: namespaces it removed, and others it left."""

    removed: tuple[str, ...] = ()
    # Abandoned, but a process still runs inside (an orphaned rank of the killed run).
    busy: tuple[str, ...] = ()
    # No lease file: made before leases existed, or by hand; not ours to judge.
    unowned: tuple[str, ...] = ()

    def notes(self) -> list[str]:
        """One line per kind of finding, for the user (nothing when there was nothing)."""
        out = []
        if self.removed:
            out.append(
                f"removed {len(self.removed)} network namespaces a killed run left behind: "
                + ", ".join(self.removed)
            )
        if self.busy:
            out.append(
                "left network namespaces of a killed run that processes still use (removed "
                "by a later run once they exit): " + ", ".join(self.busy)
            )
        if self.unowned:
            out.append(
                "network namespaces with no lease (left by an older sgdsim, or made by hand); "
                "if nothing uses them, remove each with `ip netns del NAME`: "
                + ", ".join(self.unowned)
            )
        return out


def list_namespaces() -> list[str]:
    """The names of the machine's network namespaces (``ip netns list``)."""
    return [line.split()[0] for line in run_ip("ip", "netns", "list").splitlines() if line.strip()]


def _in_use(namespace: str) -> bool:
    return bool(run_ip("ip", "netns", "pids", namespace).split())


def _lease_path(tag: str) -> Path:
    return LEASE_DIR / f"{tag}.lease"


@contextlib.contextmanager
def cluster_lease(tag: str) -> Iterator[None]:
    """Hold the lease of cluster ``tag`` (a fresh tag: nobody else has it) for the block.

    Enter it before creating the namespaces and leave it after deleting them. When the block
    ends with namespaces of the tag still there (a deletion failed), the lease file stays, so
    that a later cluster removes them once this process is gone.
    """
    LEASE_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = _lease_path(tag)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)  # a fresh tag: at most a reaper holds it, briefly
        # A reaper may have unlinked the file between our open and lock (it saw no namespaces
        # of the tag yet): then we hold a lock nobody can see; take it again on a new file.
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        yield
    finally:
        try:
            if not _namespaces_left(tag):
                path.unlink(missing_ok=True)
        finally:
            os.close(fd)  # unlocks


def _namespaces_left(tag: str) -> bool:
    """Whether namespaces of cluster ``tag`` exist (when that cannot be known: yes, so that its
    lease file stays for a later reaper; an error here would hide the one that ended the block)."""
    try:
        return tag in _clusters(list_namespaces())
    except SgdsimError:
        return True


def _clusters(names: Iterable[str]) -> dict[str, list[str]]:
    """The clusters' namespaces among ``names``, by tag."""
    by_tag: dict[str, list[str]] = defaultdict(list)
    for name in names:
        match = _NAME.match(name)
        if match:
            by_tag[match.group(1)].append(name)
    return by_tag


@contextlib.contextmanager
def _taken_if_free(path: Path) -> Iterator[bool | None]:
    """Take the lease at ``path`` for the block if nobody holds it: True when taken, False
    when its cluster holds it, None when there is no such lease."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        yield None
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
        else:
            yield True
    finally:
        os.close(fd)


def reap_abandoned() -> Reaped:
    """Remove the namespaces of clusters whose process is gone (their lease is free).

    Safe beside running clusters and other reapers: a cluster's lease is held from before its
    first namespace exists until after its last is deleted, and a reaper deletes a tag's
    namespaces only while it holds that lease itself.
    """
    by_tag = _clusters(list_namespaces())
    removed: list[str] = []
    busy: list[str] = []
    unowned: list[str] = []
    for tag, names in sorted(by_tag.items()):
        path = _lease_path(tag)
        with _taken_if_free(path) as taken:
            if taken is None:
                unowned += names
                continue
            if not taken:
                continue  # its cluster is running
            # Listed again now that nobody else can delete them: a cluster that ended or a
            # reaper that finished since the first listing took some away.
            names = _clusters(list_namespaces()).get(tag, [])
            if any(_in_use(n) for n in names):
                busy += names
                continue
            # The bridge's namespace first listed, so deleted last (delete_namespaces reverses).
            ordered = sorted(names, key=lambda n: (not n.endswith("-br"), n))
            left = set(delete_namespaces(ordered))
            removed += [n for n in ordered if n not in left]
            if not left:
                path.unlink(missing_ok=True)
    # Lease files with no namespace (a reaper raced another): remove those nobody holds.
    with contextlib.suppress(FileNotFoundError):
        for path in LEASE_DIR.glob("*.lease"):
            if path.stem not in by_tag:
                with _taken_if_free(path) as taken:
                    if taken:
                        path.unlink(missing_ok=True)
    return Reaped(tuple(removed), tuple(busy), tuple(unowned))
