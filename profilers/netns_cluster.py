"""An emulated cluster on one Linux machine: a network namespace per node, a bridge, tc shaping.

Every node (a parameter server or a worker, one rank each) gets a network namespace of its own
with one interface, ``eth0``, whose veth peer is a port of a bridge in one more namespace: a
switch with nothing else attached. A shaped node has a ``tc tbf`` qdisc on both ends of its veth
pair, one per direction: on ``eth0`` for what it sends, on the bridge port for what it receives.
So a parameter server behind a 100 Mbit/s link is ``shaped={0: 100e6}``; ring AllReduce over
1 Gbit/s NICs shapes every node.

Nothing is created outside the cluster's own namespaces (named ``sgdsim-<tag>-...``); deleting
them removes every interface and qdisc, so teardown is complete and touches nothing else. A
process joins a node with :func:`profilers.netns.enter_namespace` (the runner's ranks do this
after forking) or ``ip netns exec``. Needs Linux, root and iproute2; when that is missing, a
:class:`~simcore.errors.ConfigError` says so.

SIGTERM while a cluster exists exits through its cleanup. If the process is killed with SIGKILL
the namespaces stay behind until the next cluster is created on the machine: it removes those
no running process holds (:mod:`profilers.netns_leases`) and says so on stderr. ``ip netns list
| grep sgdsim-`` shows them meanwhile, and ``ip netns del NAME`` removes one by hand.
"""

from __future__ import annotations

import contextlib
import secrets
import signal
import sys
import threading
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from profilers.netns import (
    TBF_LATENCY,
    check_permitted,
    delete_namespaces,
    run_ip,
    tbf_options,
    tbf_segments_gso,
)
from profilers.netns_leases import cluster_lease, reap_abandoned
from simcore.errors import ConfigError, ProfilingError, SgdsimError
from simcore.units import format_bandwidth

__all__ = ["NODE_IFNAME", "EmulatedCluster", "emulated_cluster"]

NODE_IFNAME = "eth0"  # the one interface of every node (each in its own namespace: no clash)
_SUBNET = "10.214.0"  # /24 private to the bridge namespace; node i is .(i+1)
_MAX_NODES = 250
# A node's tbf bucket: 1 ms at the rate. Transfers of a training step last tens of ms or more, so
# they are shaped all the same; a 100 us bucket made the emulation's own interrupts slow the
# workers' computation (compute per step of a 100 Mbit/s solo run: 108 ms against 79 ms). Below
# ~545 Mbit/s even 1 ms is smaller than one of TCP's GSO packets, which tbf then segments in
# software (netns.tbf_segments_gso): each byte then costs the ranks ~20x the CPU it would with
# whole packets (scenarios/research/testbed_segmentation.py). Every kept validation campaign ran
# so; the predictions measure that CPU rather than assume a real NIC's.
BURST_S = 1e-3


@dataclass(frozen=True)
class EmulatedCluster:
    """The namespaces and addresses of a running cluster (index i: node i)."""

    namespaces: tuple[str, ...]
    addrs: tuple[str, ...]
    bridge_namespace: str
    shaped_bps: Mapping[int, float] = field(default_factory=dict)
    ifname: str = NODE_IFNAME
    burst_s: float = BURST_S

    @property
    def nodes(self) -> int:
        return len(self.namespaces)

    def describe(self) -> str:
        """One line: nodes, and which links are shaped to what."""
        shaped = ", ".join(
            f"node {i} {format_bandwidth(rate)}" for i, rate in sorted(self.shaped_bps.items())
        )
        text = (
            f"{self.nodes} network namespaces on one bridge; tc tbf both directions "
            f"(burst {self.burst_s * 1e3:g} ms, latency {TBF_LATENCY}) on: {shaped or 'none'}"
        )
        if any(tbf_segments_gso(rate, self.burst_s) for rate in self.shaped_bps.values()):
            text += "; buckets smaller than a GSO packet: tbf segments TCP's sends in software"
        return text


@contextlib.contextmanager
def emulated_cluster(
    nodes: int, shaped_bps: Mapping[int, float] | None = None, *, burst_s: float = BURST_S
) -> Iterator[EmulatedCluster]:
    """Create ``nodes`` namespaces on a bridge, shape the given nodes' links; remove all on exit.

    Parameters
    ----------
    nodes : int
        Number of nodes (namespaces with one address each).
    shaped_bps : mapping of node index to bits per second
        Nodes whose link is shaped, each direction to that rate; the others are unshaped (veth
        and bridge at memory speed).
    burst_s : float
        tbf bucket of a shaped link, as time at its rate (default 1 ms, see ``BURST_S``).

    Raises
    ------
    ConfigError
        Bad arguments, or not permitted here.
    ProfilingError
        An ``ip``/``tc`` command failed, or a namespace could not be removed afterwards.
    """
    shaped = dict(shaped_bps or {})
    if not 1 <= nodes <= _MAX_NODES:
        raise ConfigError(f"nodes: must be in 1..{_MAX_NODES}, got {nodes}")
    for node, rate in shaped.items():
        if not 0 <= node < nodes:
            raise ConfigError(f"shaped_bps: node {node} is not in 0..{nodes - 1}")
        if not rate > 0:
            raise ConfigError(f"shaped_bps: node {node}: rate must be > 0 bit/s, got {rate!r}")
    if not burst_s > 0:
        raise ConfigError(f"burst_s: must be > 0 s, got {burst_s!r}")
    check_permitted("emulated cluster")
    _reap_abandoned_clusters()
    tag = secrets.token_hex(3)  # unique per cluster, so two runs never touch each other's
    cluster = EmulatedCluster(
        namespaces=tuple(f"sgdsim-{tag}-n{i}" for i in range(nodes)),
        addrs=tuple(f"{_SUBNET}.{i + 1}" for i in range(nodes)),
        bridge_namespace=f"sgdsim-{tag}-br",
        shaped_bps=shaped,
        burst_s=burst_s,
    )
    created: list[str] = []
    stack = contextlib.ExitStack()
    try:
        stack.enter_context(_terminate_as_exit())
        stack.enter_context(cluster_lease(tag))  # before the first namespace exists
        for ns in (cluster.bridge_namespace, *cluster.namespaces):
            run_ip("ip", "netns", "add", ns)
            created.append(ns)
        _build(cluster)
        yield cluster
    finally:
        leftovers = delete_namespaces(created)
        stack.close()
        if leftovers:
            warnings.warn(f"could not delete network namespaces {leftovers}", stacklevel=2)
    if leftovers:
        raise ProfilingError(
            f"could not delete network namespaces {leftovers}; remove them with `ip netns del`"
        )


def _reap_abandoned_clusters() -> None:
    """Remove what killed runs left (best effort: a failure here is said, not raised; the new
    cluster's names cannot clash with theirs)."""
    try:
        notes = reap_abandoned().notes()
    except SgdsimError as err:
        notes = [f"could not look for network namespaces a killed run left: {err}"]
    for note in notes:
        print(f"sgdsim: note: {note}", file=sys.stderr)


@contextlib.contextmanager
def _terminate_as_exit() -> Iterator[None]:
    """While the cluster exists, SIGTERM (``kill``, a CI timeout) exits through the ``finally``
    clauses, which delete the namespaces, instead of killing the process on the spot."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers; the caller's own then applies
        return

    def exit_now(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, exit_now)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def _build(cluster: EmulatedCluster) -> None:
    br = cluster.bridge_namespace
    # The names are ours and contain no spaces, so commands can be written as one string.
    run_ip(*f"ip -n {br} link add br0 type bridge".split())
    run_ip(*f"ip -n {br} link set br0 up".split())
    for i, (ns, addr) in enumerate(zip(cluster.namespaces, cluster.addrs, strict=True)):
        port = f"p{i}"
        veth = f"ip link add {cluster.ifname} netns {ns} type veth peer name {port} netns {br}"
        run_ip(*veth.split())
        run_ip(*f"ip -n {br} link set {port} master br0".split())
        run_ip(*f"ip -n {br} link set {port} up".split())
        run_ip(*f"ip -n {ns} addr add {addr}/24 dev {cluster.ifname}".split())
        run_ip(*f"ip -n {ns} link set {cluster.ifname} up".split())
        run_ip(*f"ip -n {ns} link set lo up".split())
        rate = cluster.shaped_bps.get(i)
        if rate is not None:
            for where, dev in ((ns, cluster.ifname), (br, port)):
                run_ip(
                    *f"tc -n {where} qdisc add dev {dev} root tbf".split(),
                    *tbf_options(rate, cluster.burst_s),
                )
