"""What a distributed run does: the architecture, overlap, sizes, and limits, validated once.

A run has ``workers`` training processes and, for the parameter-server architectures, ``servers``
server processes. Ranks are laid out servers first: ranks ``0 .. P-1`` are the servers and ranks
``P .. P+W-1`` the workers (ring AllReduce has ``P = 0``). :class:`RunConfig` is frozen and
picklable, so a spawned rank receives it as it is.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from simcore.errors import ConfigError, ProfilingError
from simcore.sim.buckets import DEFAULT_BUCKET_CAP_BYTES, DEFAULT_FIRST_BUCKET_BYTES, MIB

__all__ = [
    "Architecture",
    "CommHook",
    "DistributedRunError",
    "ModelRef",
    "Overlap",
    "RunConfig",
]

# A model: a built-in name (``mlp``), a factory path (``package.module:factory``), or a picklable
# zero-argument factory (an ``nn.Module`` subclass or a module-level function).
ModelRef = str | Callable[[], Any]

DEFAULT_TIMEOUT_S = 60.0


class DistributedRunError(ProfilingError):
    """A distributed run failed: a rank raised, died or hung. Names the rank and its role."""


class Architecture(str, enum.Enum):
    """How workers combine their gradients."""

    PS_ASYNC = "ps-async"  # parameter server, each worker's gradients applied as they arrive
    PS_SYNC = "ps-sync"  # parameter server, gradients of all workers averaged per step
    ALLREDUCE = "allreduce"  # ring AllReduce of each layer's gradients, local SGD step
    # torch.nn.parallel.DistributedDataParallel: gradients all-reduced in buckets as the
    # backward pass fills them, then a local SGD step (profilers.distributed.ddp_worker)
    DDP = "ddp"

    @property
    def uses_servers(self) -> bool:
        return self not in (Architecture.ALLREDUCE, Architecture.DDP)


class CommHook(str, enum.Enum):
    """What a DDP bucket's communication does (torch's default hooks, timed)."""

    ALLREDUCE = "allreduce"  # the bucket's float32 gradients, averaged
    FP16 = "fp16"  # cast to float16 before the AllReduce and back after (fp16_compress_hook)


class Overlap(str, enum.Enum):
    """How a worker overlaps communication with computation within a step."""

    STRICT = "strict"  # all pulls, then forward and backward, then all pushes
    LAYERWISE = (
        "layerwise"  # a layer waits only for its own pull; its push starts after its backward
    )


@dataclass(frozen=True)
class RunConfig:
    """One distributed training run.

    Attributes
    ----------
    model : built-in name, ``package.module:factory`` path or picklable factory.
    architecture : ``ps-async``, ``ps-sync`` or ``allreduce`` (an :class:`Architecture`).
    overlap : ``strict`` or ``layerwise`` (an :class:`Overlap`).
    workers : number of worker processes W (>= 1).
    servers : number of parameter servers P (1 or more for PS, 0 for AllReduce).
    batch_size : examples per worker and step.
    steps : steps per worker, warm-up included.
    warmup : first steps of each worker left out of throughput and profiles.
    seed : model initialization, teacher and batches (see :mod:`profilers.distributed.task`).
    lr, momentum : SGD settings, the profiler's by default.
    input_shape, num_classes : override the model's own (required for a user model without them).
    timeout_s : limit in seconds on the rendezvous, on every gloo operation, and on the parent's
        wait for progress; a rank that dies or hangs ends the run within about this long.
    threads : torch intra-op threads per rank (None: the cores the rank may run on, shared out
        among the ranks on the machine, at least one: ``launch.default_threads``; torch's own
        default counts every core of the machine and oversubscribes co-located ranks).
    device : ``cpu`` or ``cuda``; on CUDA, worker w uses GPU ``w % device_count``.
    bucket_cap_mb, first_bucket_mb : DDP's bucket limits in MiB (None: torch's defaults, 25 and
        1; a cap given alone makes the first bucket as large, as torch does).
    comm_hook : DDP's bucket communication, ``allreduce`` or ``fp16`` (a :class:`CommHook`).
    gradient_as_bucket_view : DDP's option of that name (gradients alias the buckets).
    master_addr, master_port : rendezvous address (port 0: a free port is chosen when spawning).
    """

    model: ModelRef
    architecture: Architecture = Architecture.PS_ASYNC
    overlap: Overlap = Overlap.LAYERWISE
    workers: int = 1
    servers: int = 1
    batch_size: int = 32
    steps: int = 20
    warmup: int = 5
    seed: int = 0
    lr: float = 0.01
    momentum: float = 0.9
    input_shape: tuple[int, ...] | None = None
    num_classes: int | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    threads: int | None = None
    device: str = "cpu"
    master_addr: str = "127.0.0.1"
    master_port: int = 0
    bucket_cap_mb: float | None = None
    first_bucket_mb: float | None = None
    comm_hook: CommHook = CommHook.ALLREDUCE
    gradient_as_bucket_view: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "architecture", _enum(Architecture, self.architecture, "arch"))
        object.__setattr__(self, "overlap", _enum(Overlap, self.overlap, "overlap"))
        object.__setattr__(self, "comm_hook", _enum(CommHook, self.comm_hook, "comm_hook"))
        self._check_ddp()
        for name, minimum in (("workers", 1), ("batch_size", 1), ("steps", 1), ("warmup", 0)):
            _check_int(name, getattr(self, name), minimum)
        _check_int("servers", self.servers, 0)
        if self.architecture.uses_servers and self.servers < 1:
            raise ConfigError(f"servers: {self.architecture.value} needs at least 1, got 0")
        if not self.architecture.uses_servers and self.servers != 0:
            arch = self.architecture.value
            raise ConfigError(f"servers: {arch} has no parameter servers; got {self.servers}")
        if self.warmup >= self.steps:
            raise ConfigError(
                f"warmup: must be below steps ({self.steps}) so that some steps are measured, "
                f"got {self.warmup}"
            )
        if not self.timeout_s > 0:
            raise ConfigError(f"timeout_s: must be > 0 s, got {self.timeout_s!r}")
        if self.threads is not None:
            _check_int("threads", self.threads, 1)
        if isinstance(self.model, str) and ":" not in self.model:
            from profilers.models import get_spec  # fail here, not in every spawned rank

            get_spec(self.model)
        if not 0 <= self.master_port < 65536:
            raise ConfigError(f"master_port: must be in 0..65535, got {self.master_port}")
        if not (self.lr > 0 and 0 <= self.momentum < 1):
            raise ConfigError(
                f"lr > 0 and 0 <= momentum < 1 needed, got {self.lr}, {self.momentum}"
            )

    def _check_ddp(self) -> None:
        ddp = self.architecture is Architecture.DDP
        given = [
            name
            for name, value, default in (
                ("bucket_cap_mb", self.bucket_cap_mb, None),
                ("first_bucket_mb", self.first_bucket_mb, None),
                ("comm_hook", self.comm_hook, CommHook.ALLREDUCE),
                ("gradient_as_bucket_view", self.gradient_as_bucket_view, False),
            )
            if value != default
        ]
        if given and not ddp:
            raise ConfigError(f"{given[0]}: a DDP setting; arch is {self.architecture.value}")
        for name in ("bucket_cap_mb", "first_bucket_mb"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, int | float) and value > 0):
                raise ConfigError(f"{name}: must be > 0 MiB, got {value!r}")
        if ddp and self.overlap is Overlap.STRICT:
            raise ConfigError("overlap: DDP all-reduces buckets during the backward pass")

    def bucket_limits_bytes(self) -> tuple[int, int]:
        """DDP's bucket cap and first bucket's limit in bytes as torch applies the options:
        25 MiB and 1 MiB by default, a cap given alone for the first bucket too, a first bucket
        given of its own (:func:`profilers.distributed.ddp_worker.ddp_module`)."""
        cap = int(self.bucket_cap_mb * MIB) if self.bucket_cap_mb else DEFAULT_BUCKET_CAP_BYTES
        if self.first_bucket_mb is not None:
            return cap, int(self.first_bucket_mb * MIB)
        return cap, cap if self.bucket_cap_mb is not None else DEFAULT_FIRST_BUCKET_BYTES

    def buckets_text(self) -> str:
        """``25 MiB (1 MiB first)``, ``1 MiB``: DDP's bucket limits as torch applies them."""
        cap, first = self.bucket_limits_bytes()
        text = _binary_size(cap)
        return text if first == cap else f"{text} ({_binary_size(first)} first)"

    @property
    def world_size(self) -> int:
        """Ranks in all: servers, then workers."""
        return self.servers + self.workers

    def role(self, rank: int) -> tuple[str, int]:
        """``("server", s)`` or ``("worker", w)`` for a global rank."""
        if rank < self.servers:
            return "server", rank
        return "worker", rank - self.servers

    def worker_rank(self, worker: int) -> int:
        """Global rank of worker index ``worker``."""
        return self.servers + worker

    @property
    def measured_steps(self) -> int:
        return self.steps - self.warmup


def _enum(cls: Any, value: Any, option: str) -> Any:
    try:
        return cls(value)
    except ValueError:
        choices = ", ".join(m.value for m in cls)
        raise ConfigError(f"{option}: {value!r} is not one of {choices}") from None


def _binary_size(nbytes: int) -> str:
    """``25 MiB``, ``512 KiB``, ``100 B``: a bucket limit in the unit torch's options count."""
    for unit, size in (("MiB", MIB), ("KiB", 1024)):
        if nbytes >= size:
            return f"{nbytes / size:g} {unit}"
    return f"{nbytes} B"


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{name}: must be an integer >= {minimum}, got {value!r}")
