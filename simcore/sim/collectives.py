"""AllReduce algorithms as cost models: what one rank sends and how many hops lie in sequence.

A collective of ``nbytes`` among ``k`` participants (hosts, or workers with one device each) is
described by two numbers the simulator turns into time on each rank's own link:

- ``bits(nbytes, k)``: what the busiest rank's link carries in each direction, in bits, the
  pipeline's fill included; it moves at the rank's bandwidth (the ``allreduce`` sharing policy:
  every rank on a link of its own, capped by the per-flow cap);
- ``hops(k)``: the messages that follow one another, each paying the per-message latency
  ``latency_s`` (the alpha of the alpha-beta cost).

So a collective takes ``hops * alpha + bits / B``. One participant exchanges nothing.

- :class:`RingAllReduce` (``ring``): a reduce-scatter and an all-gather of ``k - 1`` steps each,
  every step passing ``1/k`` of the data to the next rank: ``2 (k-1)/k * nbytes`` and
  ``2 (k-1)`` hops (TPDS'22 Eq. 11; the paper's ring and NCCL's ring algorithm).
- :class:`DoubleBinaryTree` (``tree``): NCCL's tree algorithm (``src/graph/trees.cc`` in
  NVIDIA/nccl, ``ncclGetBtree``/``ncclGetDtree``). Two binary trees over the ranks, the second
  the mirror of the first (or the first shifted by one rank when ``k`` is odd), so that a rank
  inner in one tree is a leaf in the other; each carries half of the data, reduced up to its
  root and broadcast back down, pipelined in chunks (:data:`TREE_CHUNK_BYTES`). In one tree a
  rank sends half of the data to its parent and to each child and receives as much, so its
  link carries ``(parent + children) * nbytes / 2`` each way, summed over both trees; the
  busiest rank (an inner node with a parent and two children: 4 ``nbytes / 2``) paces the
  pipeline. The first chunk must climb the tree and come back down, ``2 depth`` hops, before
  the pipeline is full: ``2 depth`` latencies and ``2 depth - 1`` more chunks of bytes. The
  bandwidth term is thus about ``2 nbytes`` against the ring's ``2 (k-1)/k nbytes``, the
  latency term ``2 log2(k)`` hops against ``2 (k-1)``: the tree wins where latency dominates
  (small buckets, many ranks).

Policies are small classes with a name, registered like the sharing policies; a reduce-scatter
and an all-gather (FSDP, ZeRO) would be two more hooks of the same shape.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from functools import lru_cache
from typing import ClassVar

from simcore.errors import ConfigError

__all__ = [
    "TREE_CHUNK_BYTES",
    "Collective",
    "DoubleBinaryTree",
    "RingAllReduce",
    "binary_tree",
    "collective_names",
    "double_binary_trees",
    "get_collective",
]

#: NCCL's pipeline step with its Simple protocol: a 4 MiB buffer per channel cut in 8 steps.
TREE_CHUNK_BYTES = 512 * 1024


class Collective(ABC):
    """An AllReduce algorithm as a cost model (see the module docstring)."""

    name: ClassVar[str] = ""
    min_participants: ClassVar[int] = 1

    @abstractmethod
    def bits(self, nbytes: float, k: int) -> float:
        """Bits the busiest of ``k`` ranks carries each way to all-reduce ``nbytes``."""

    @abstractmethod
    def hops(self, k: int) -> int:
        """Messages in sequence, each paying the per-message latency once."""

    def time_s(self, nbytes: float, k: int, bandwidth_bps: float, latency_s: float) -> float:
        """The collective alone on links of ``bandwidth_bps``: ``hops * latency + bits / B``."""
        return self.hops(k) * latency_s + self.bits(nbytes, k) / bandwidth_bps


class RingAllReduce(Collective):
    """The ring: ``2 (k-1)/k`` of the data each way, ``2 (k-1)`` hops in sequence."""

    name = "ring"

    def bits(self, nbytes: float, k: int) -> float:
        return 0.0 if k < 2 else 8.0 * nbytes * 2.0 * (k - 1) / k

    def hops(self, k: int) -> int:
        return 0 if k < 2 else 2 * (k - 1)


class DoubleBinaryTree(Collective):
    """NCCL's double binary tree, pipelined in chunks (see the module docstring)."""

    name = "tree"
    min_participants = 2

    def __init__(self, chunk_bytes: int = TREE_CHUNK_BYTES) -> None:
        self.chunk_bytes = chunk_bytes

    def bits(self, nbytes: float, k: int) -> float:
        if k < 2:
            return 0.0
        half = nbytes / 2.0
        busiest = max_degree(k) * half
        fill = (2 * tree_depth(k) - 1) * min(float(self.chunk_bytes), half)
        return 8.0 * (busiest + fill)

    def hops(self, k: int) -> int:
        return 0 if k < 2 else 2 * tree_depth(k)


def binary_tree(k: int, rank: int) -> tuple[int, tuple[int, ...]]:
    """The parent (-1 for the root) and children of ``rank`` in NCCL's binary tree of ``k``.

    Rank 0 is the root, with one child: the largest power of two below ``k``. Any other rank
    with lowest set bit ``b`` has its parent at ``rank`` with that bit moved one place up (or
    just cleared, when that would leave the ranks) and its children at ``rank - b/2`` and at
    ``rank + b/2``, the latter's step halved until it falls inside the ranks.
    """
    bit = 1
    while bit < k and not bit & rank:
        bit <<= 1
    if rank == 0:
        return -1, ((bit >> 1,) if k > 1 else ())
    parent = (rank ^ bit) | (bit << 1)
    if parent >= k:
        parent = rank ^ bit
    low = bit >> 1
    if low == 0:
        return parent, ()
    children = [rank - low]
    while low and rank + low >= k:
        low >>= 1
    if low:
        children.append(rank + low)
    return parent, tuple(children)


def double_binary_trees(k: int) -> tuple[tuple[tuple[int, tuple[int, ...]], ...], ...]:
    """Both trees: per tree, per rank, (parent, children). The second is the first mirrored
    (``k`` even) or shifted by one rank (``k`` odd)."""
    first = tuple(binary_tree(k, r) for r in range(k))
    if k % 2 == 0:

        def moved(r: int) -> int:
            return k - 1 - r

        source = [k - 1 - r for r in range(k)]
    else:

        def moved(r: int) -> int:
            return (r + 1) % k

        source = [(r - 1) % k for r in range(k)]
    second = []
    for r in range(k):
        parent, children = first[source[r]]
        second.append((-1 if parent < 0 else moved(parent), tuple(moved(c) for c in children)))
    return first, tuple(second)


@lru_cache(maxsize=256)
def max_degree(k: int) -> int:
    """The most links any rank uses over both trees (parent plus children, summed)."""
    trees = double_binary_trees(k)
    return max(
        sum((parent >= 0) + len(children) for parent, children in (t[r] for t in trees))
        for r in range(k)
    )


@lru_cache(maxsize=256)
def tree_depth(k: int) -> int:
    """Edges from the root to the deepest leaf, the deeper of the two trees."""
    depth = 0
    for tree in double_binary_trees(k):
        for rank in range(k):
            d, r = 0, rank
            while tree[r][0] >= 0:
                r = tree[r][0]
                d += 1
            depth = max(depth, d)
    return depth


_REGISTRY: dict[str, type[Collective]] = {
    RingAllReduce.name: RingAllReduce,
    DoubleBinaryTree.name: DoubleBinaryTree,
}


def collective_names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def get_collective(name: str) -> Collective:
    """The collective registered as ``name``; ConfigError listing the names otherwise."""
    try:
        return _REGISTRY[name]()
    except KeyError:
        raise ConfigError(f"collective: {name!r} is not one of {', '.join(_REGISTRY)}") from None
