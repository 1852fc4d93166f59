"""Where a real run happens on one machine: its links (loopback or an emulated cluster) and cores.

:class:`Testbed` runs a :class:`~profilers.distributed.config.RunConfig` either with every rank on
loopback or in the emulated cluster of :mod:`profilers.netns_cluster` (root), one network
namespace per rank, with the parameter servers' links (ring AllReduce: every worker's) shaped to
``link_rate_bps`` and optionally each parameter-server worker's link to ``worker_rate_bps``.
With two or more cores it pins the servers to the first core and the workers to the others, so
that a server's CPU work does not slow the workers' computation, as on a cluster where the server
has a machine of its own.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from profilers.distributed.config import Architecture, RunConfig
from profilers.distributed.records import RunResult
from profilers.distributed.spawn import ProgressEvent, run_distributed
from profilers.netns_cluster import BURST_S, emulated_cluster
from simcore.errors import ConfigError

__all__ = ["Testbed", "available_cores"]


def available_cores() -> tuple[int, ...]:
    """The CPU cores this process may run on (all of them where affinity is unknown)."""
    if hasattr(os, "sched_getaffinity"):
        return tuple(sorted(os.sched_getaffinity(0)))
    return tuple(range(os.cpu_count() or 1))


@dataclass(frozen=True)
class Testbed:
    """Where the real runs happen: the links (loopback, or an emulated cluster with shaped links)
    and the cores of each rank.

    With two or more cores the parameter servers get the first core and the workers share the
    others, so that a server is a machine of its own as far as the workers' computation goes
    (as in the simulator, which charges no server CPU to the workers); ring AllReduce workers
    share all cores. ``pinned=False`` leaves every rank free to run on any core (the servers'
    and the workers' transfers then spread their CPU work over all of them).
    """

    link_rate_bps: float | None = None
    cores: tuple[int, ...] = field(default_factory=lambda: available_cores())
    worker_rate_bps: float | None = None  # also shape each PS worker's link (its NIC) to this
    burst_s: float = BURST_S  # each shaped link's tbf bucket, as time at its rate
    pinned: bool = True  # servers on the first core, workers on the others (see above)

    def server_core(self, arch: Architecture) -> bool:
        """Whether the servers of ``arch`` get the first core to themselves."""
        return self.pinned and arch.uses_servers and len(self.cores) >= 2

    def rank_cpus(self, config: RunConfig) -> list[set[int]] | None:
        """The cores of each rank, servers first; None: no pinning."""
        if not self.server_core(config.architecture):
            return None
        return self.server_and_worker_cpus(config.servers, config.workers)

    def server_and_worker_cpus(self, servers: int, workers: int) -> list[set[int]] | None:
        """The cores of ``servers`` server ranks then ``workers`` worker ranks: the first core
        for the servers, the others shared by the workers; None (no pinning) on one core."""
        if len(self.cores) < 2:
            return None
        return [{self.cores[0]}] * servers + [set(self.cores[1:])] * workers

    def worker_cores(self, arch: Architecture) -> float:
        """Cores the workers of ``arch`` share (the simulator's ``host_cpu_cores``)."""
        return float(len(self.cores) - 1 if self.server_core(arch) else len(self.cores))

    def run(
        self, config: RunConfig, progress: Callable[[ProgressEvent], None] | None = None
    ) -> RunResult:
        """Run ``config`` here (see :func:`~profilers.distributed.spawn.run_distributed`)."""
        cpus = self.rank_cpus(config)
        shaped = self.shaped_bps(config)
        if shaped is None:
            return run_distributed(config, progress, cpus=cpus)
        with emulated_cluster(config.world_size, shaped, burst_s=self.burst_s) as cluster:
            return run_distributed(config, progress, cluster=cluster, cpus=cpus)

    def shaped_bps(self, config: RunConfig) -> dict[int, float] | None:
        """The shaped rate of each rank's link; None: loopback (no emulated cluster)."""
        rate = self.link_rate_bps
        if rate is None:
            if self.worker_rate_bps is not None:
                raise ConfigError("worker_rate_bps: needs link_rate_bps (the emulated cluster)")
            return None
        if not config.servers:  # ring AllReduce: a worker's link is the ring's link
            return dict.fromkeys(range(config.world_size), rate)
        shaped = dict.fromkeys(range(config.servers), rate)
        if self.worker_rate_bps is not None:
            shaped.update(
                dict.fromkeys(range(config.servers, config.world_size), self.worker_rate_bps)
            )
        return shaped
