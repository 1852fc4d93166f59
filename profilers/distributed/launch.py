"""Run one rank of a distributed run: join the group, play the role, return the records.

:func:`run_rank` is what every rank runs, whoever started it; :func:`run_rank_from_env` runs the
rank that torchrun (or any launcher) describes in the environment (``RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``, ``MASTER_PORT``), and :func:`combine` joins the outputs of all ranks into a
:class:`RunResult`. :mod:`profilers.distributed.spawn` starts every rank on this machine.

Inside a rank, gloo's own timeout (``timeout_s``) bounds every wait on a peer, so a rank whose
peer died or hangs fails by itself too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from profilers.clocks import clock_for
from profilers.distributed.config import Architecture, DistributedRunError, RunConfig
from profilers.distributed.ddp_worker import DdpWorkerLoop
from profilers.distributed.records import DdpBucketRecord, RunResult, Span, StepRecord, merge
from profilers.distributed.server import ServerLoop
from profilers.distributed.task import ParamLayer, build_setup
from profilers.distributed.worker import WorkerLoop
from simcore.errors import ConfigError

__all__ = [
    "RankOutput",
    "combine",
    "place_layers",
    "run_rank",
    "run_rank_from_env",
]


@dataclass(frozen=True)
class RankOutput:
    """What one rank measured, and the parameters it holds at the end (numpy, by name)."""

    rank: int
    role: str
    model_name: str
    layer_nbytes: dict[str, int]
    spans: list[Span]
    steps: list[StepRecord]
    final_state: dict[str, np.ndarray[Any, Any]] = field(default_factory=dict)
    buckets: tuple[DdpBucketRecord, ...] = ()  # DDP: the buckets it all-reduced


def place_layers(layers: Sequence[ParamLayer], servers: int) -> dict[int, int]:
    """Server of each parameterized layer (by index): the simulator's ``greedy`` placement.

    In forward order, each layer goes to the server holding the fewest bytes so far, ties to the
    lowest index: the rule of :func:`simcore.sim.dag.assign_servers`, applied to the same layers.
    """
    load = [0] * max(servers, 1)
    placement = {}
    for layer in layers:
        server = min(range(len(load)), key=lambda s: (load[s], s))
        placement[layer.index] = server
        load[server] += layer.nbytes
    return placement


def _device(config: RunConfig, role: str, index: int) -> torch.device:
    if not config.device.startswith("cuda") or role == "server":
        return torch.device("cpu")  # servers apply updates on the CPU
    if not torch.cuda.is_available():
        raise ConfigError(f"device: {config.device!r} requested, but this torch sees no CUDA GPU")
    return torch.device("cuda", index % torch.cuda.device_count())


def _backend(config: RunConfig) -> str:
    # NCCL has no tags and no CPU tensors, so the parameter server always talks gloo (staging
    # through host memory); ring AllReduce on GPUs uses NCCL. The NCCL path is not tested here.
    gpu = config.device.startswith("cuda")
    if gpu and not config.architecture.uses_servers and dist.is_nccl_available():
        return "nccl"
    return "gloo"


def default_threads(config: RunConfig) -> int:
    """Torch threads for a rank when ``config.threads`` is None: the cores this rank may run
    on, shared out among the ranks on this machine (``LOCAL_WORLD_SIZE`` under torchrun, else
    all of them, which run_distributed spawns here), at least one.

    torch's default counts the machine's cores, not the ones this rank may run on, nor the
    other ranks on them: two threads on one pinned core spin against each other (a testbed
    worker computed at half speed that way), and on 2 cores a ring of two workers with two
    threads each trained at 130-240 examples/s instead of 1060.
    """
    given = os.environ.get("LOCAL_WORLD_SIZE", "")
    local_ranks = int(given) if given.isdigit() and int(given) > 0 else config.world_size
    return max(1, len(os.sched_getaffinity(0)) // local_ranks)


def run_rank(
    config: RunConfig,
    rank: int,
    *,
    init_method: str,
    progress: Callable[[int], None] | None = None,
) -> RankOutput:
    """Join the process group as ``rank`` and play its role for the whole run.

    Raises
    ------
    DistributedRunError : a peer failed, died or hung (after gloo's timeout).
    ConfigError : the model or device is unusable.
    """
    torch.set_num_threads(config.threads or default_threads(config))
    role, index = config.role(rank)
    device = _device(config, role, index)
    setup = build_setup(config, device)
    placement = place_layers(setup.param_layers, config.servers)
    report = progress or (lambda _step: None)
    try:
        dist.init_process_group(
            _backend(config),
            init_method=init_method,
            rank=rank,
            world_size=config.world_size,
            timeout=timedelta(seconds=config.timeout_s),
        )
    except RuntimeError as err:  # the rendezvous timed out or the address is unusable
        raise DistributedRunError(
            f"{role} {index} (rank {rank}): cannot join the process group at {init_method}: {err}"
        ) from err
    try:
        state: dict[str, np.ndarray[Any, Any]] = {}
        buckets: tuple[DdpBucketRecord, ...] = ()
        if role == "server":
            mine = [layer for layer in setup.param_layers if placement[layer.index] == index]
            server = ServerLoop(config, rank, mine)
            server.run(report)
            spans, steps = server.spans, []
            state = _state_of(mine)
        elif config.architecture is Architecture.DDP:
            ddp = DdpWorkerLoop(config, setup, rank, index, clock_for(device))
            ddp.run(report)
            spans, steps, buckets = ddp.spans, ddp.steps, ddp.buckets
            if index == 0:
                state = _state_of(setup.param_layers)
        else:
            worker = WorkerLoop(config, setup, rank, index, placement, clock_for(device))
            worker.run(report)
            spans, steps = worker.spans, worker.steps
            if not config.architecture.uses_servers and index == 0:
                state = _state_of(setup.param_layers)
        dist.barrier()  # nobody closes its connections while a peer still reads from them
    except DistributedRunError:
        raise
    except RuntimeError as err:  # gloo reports a dead or silent peer this way
        raise DistributedRunError(f"{role} {index} (rank {rank}): {err}") from err
    finally:
        dist.destroy_process_group()
    nbytes = {layer.name: layer.nbytes for layer in setup.param_layers}
    return RankOutput(rank, role, setup.name, nbytes, spans, steps, state, buckets)


def _state_of(layers: Sequence[ParamLayer]) -> dict[str, np.ndarray[Any, Any]]:
    return {
        name: p.detach().cpu().numpy().copy()
        for layer in layers
        for name, p in zip(layer.param_names, layer.params, strict=True)
    }


def run_rank_from_env(config: RunConfig) -> RankOutput:
    """Run the rank described by ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``.

    ``WORLD_SIZE`` must equal ``config.servers + config.workers``; ranks below ``servers`` are the
    servers. Timestamps of different hosts are not comparable (see :mod:`.records`).
    """
    missing = [
        v for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if v not in os.environ
    ]
    if missing:
        raise ConfigError(f"environment: {', '.join(missing)} not set; launch with torchrun")
    world = int(os.environ["WORLD_SIZE"])
    if world != config.world_size:
        raise ConfigError(
            f"WORLD_SIZE: {world} ranks, but {config.servers} servers + {config.workers} workers "
            f"= {config.world_size}"
        )
    return run_rank(config, int(os.environ["RANK"]), init_method="env://")


def combine(config: RunConfig, outputs: Sequence[RankOutput]) -> RunResult:
    """One :class:`RunResult` from every rank's output."""
    if not outputs:
        raise ConfigError("outputs: no rank outputs to combine")
    spans, steps = merge([(o.spans, o.steps) for o in outputs])
    state = {name: torch.from_numpy(a) for o in outputs for name, a in o.final_state.items()}
    first = outputs[0]
    buckets = next((o.buckets for o in sorted(outputs, key=lambda o: o.rank) if o.buckets), ())
    return RunResult(
        config, first.model_name, first.layer_nbytes, spans, steps, state, buckets=buckets
    )
