"""Benchmark of the simulator (a script; pytest does not collect it): simulated ops per second.

Runs a ResNet-50 trace (the shipped ``resnet50-b32`` sample when present, otherwise a synthetic
trace of the same shape) with W = 1, 4, 16, 64 workers for each sharing policy, with and without
the timeline, and measures SimPy's own rate (a process looping over timeouts) on this machine as
the ceiling.

Usage::

    python tests/bench_simulator.py            # full table, then the target
    python tests/bench_simulator.py --quick    # a fifth of the steps, no target
    python tests/bench_simulator.py --target   # only the target: 1000 steps x 16 workers, ps
    python tests/bench_simulator.py --effects  # only the measured-network path (see below)

``--effects`` measures what every ``--network veth-1gbit`` run pays: the shipped profile's
bandwidth and latency with its flow weights (cv) and transfers' CPU cost on the host's cores,
which make every link and host CPU the general RateLink, against the same network without them
(the fast equal-share link), for a parameter server (async, sync) and ring AllReduce. It
reports CPU seconds of the process as well as wall seconds: the CPU figure is the one to
compare on a machine others load.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Generator
from typing import Any, NamedTuple

import numpy as np
import simpy

from simcore.errors import ConfigError
from simcore.sim import SimulationConfig, simulate
from simcore.trace.build import synthetic_trace
from simcore.trace.model import Trace

WORKER_COUNTS = (1, 4, 16, 64)
POLICIES = ("ps", "fcfs", "allreduce")
BANDWIDTH_BPS = 10e9
TARGET_OPS_PER_S = 200_000
TARGET_WALL_S = 50.0
# Worker-steps per measurement, so that every row simulates about the same number of ops.
WORKER_STEPS = 8000
WORKER_STEPS_TIMELINE = 1600
# --effects: the veth-1gbit profile (samples/networks), spelled out so that the bench needs no
# file; worker-steps per row.
VETH_BANDWIDTH_BPS = 920e6
VETH_LATENCY_S = 33.5e-6
VETH_FLOW_WEIGHT_CV = 0.16
VETH_COMM_CPU_S_PER_BYTE = 2.086e-9
VETH_HOST_CPU_CORES = 2.0
EFFECTS_WORKER_COUNTS = (1, 4, 16)
EFFECTS_WORKER_STEPS = 1600


def resnet50_shaped(seed: int = 0, profiled_steps: int = 10) -> Trace:
    """A synthetic trace shaped like ResNet-50: 16 bottleneck blocks with residual adds."""
    rng = np.random.default_rng(seed)
    names: list[str] = []
    sizes: list[int] = []
    inputs: dict[str, list[str]] = {}

    def layer(name: str, nbytes: int, src: list[str]) -> str:
        names.append(name)
        sizes.append(nbytes)
        if src:
            inputs[name] = src
        return name

    x = layer("conv1", 9408 * 4, [])
    x = layer("bn1", 256 * 4, [x])
    x = layer("relu", 0, [x])
    x = layer("maxpool", 0, [x])
    width = 64
    for stage, blocks in enumerate((3, 4, 6, 3)):
        for b in range(blocks):
            p = f"layer{stage + 1}_{b}"
            c_in = width * 4 if b or stage else 64
            h = layer(f"{p}_conv1", c_in * width * 4, [x])
            h = layer(f"{p}_bn1", 2 * width * 4, [h])
            h = layer(f"{p}_relu1", 0, [h])
            h = layer(f"{p}_conv2", 9 * width * width * 4, [h])
            h = layer(f"{p}_bn2", 2 * width * 4, [h])
            h = layer(f"{p}_relu2", 0, [h])
            h = layer(f"{p}_conv3", width * width * 4 * 4, [h])
            h = layer(f"{p}_bn3", 8 * width * 4, [h])
            skip = x
            if b == 0:
                skip = layer(f"{p}_down_conv", c_in * width * 4 * 4, [x])
                skip = layer(f"{p}_down_bn", 8 * width * 4, [skip])
            x = layer(f"{p}_add", 0, [h, skip])
            x = layer(f"{p}_relu3", 0, [x])
        width *= 2
    x = layer("avgpool", 0, [x])
    layer("fc", (2048 * 1000 + 1000) * 4, [x])
    n = len(names)
    base_fwd = rng.uniform(0.2e-3, 1.5e-3, n)
    fwd = [(base_fwd * rng.normal(1.0, 0.03, n)).tolist() for _ in range(profiled_steps)]
    bwd = [(2 * base_fwd * rng.normal(1.0, 0.03, n)).tolist() for _ in range(profiled_steps)]
    upd = [1e-4 if s else 0.0 for s in sizes]
    return synthetic_trace(
        fwd, bwd, sizes, update_s=upd, inputs=inputs, model_name="resnet50-shaped", batch_size=32
    )


def load_resnet50() -> Trace:
    try:
        from simcore.trace.io import load_trace

        return load_trace("resnet50-b32")
    except ConfigError:
        return resnet50_shaped()


def simpy_raw_rate(events: int = 500_000) -> float:
    """Timeouts per second of one SimPy process looping over ``env.timeout``."""
    env = simpy.Environment()

    def loop() -> Generator[simpy.Event, Any, None]:
        for _ in range(events):
            yield env.timeout(1.0)

    env.process(loop())
    start = time.perf_counter()
    env.run()
    return events / (time.perf_counter() - start)


def measure(
    trace: Trace, workers: int, policy: str, steps: int, timeline: bool
) -> tuple[float, float]:
    """Simulated ops per wall second and wall seconds of one run."""
    config = SimulationConfig(
        workers=workers,
        bandwidth_bps=BANDWIDTH_BPS,
        arch="allreduce" if policy == "allreduce" else "ps",
        mode="sync" if policy == "allreduce" else "async",
        sharing=policy,
        steps=steps,
        warmup_steps=min(50, steps // 5),
        timeline=timeline,
        seed=1,
    )
    result = simulate(trace, config)
    return result.simulated_ops / result.wall_time_s, result.wall_time_s


def print_target(trace: Trace, raw: float) -> None:
    """The issue's target: 1000 steps x 16 workers with ps, >= 200k ops/s and under 50 s."""
    rate, wall = measure(trace, 16, "ps", 1000, False)
    ok = rate >= TARGET_OPS_PER_S and wall < TARGET_WALL_S
    print(
        f"target 1000 steps x 16 workers, ps: {wall:.1f} s, {rate:,.0f} ops/s "
        f"({rate / raw:.2f} of SimPy raw): {'meets' if ok else 'MISSES'} "
        f">= {TARGET_OPS_PER_S:,} ops/s and < {TARGET_WALL_S:.0f} s",
        flush=True,
    )


def print_table(trace: Trace, raw: float, scale: int) -> None:
    """Ops/s for every policy, worker count, with and without the timeline."""
    print(
        f"{'policy':<10} {'W':>3} {'timeline':>8} {'steps':>6} {'wall s':>8} "
        f"{'ops/s':>10} {'/raw':>6}"
    )
    for policy in POLICIES:
        for workers in WORKER_COUNTS:
            for timeline in (False, True):
                budget = WORKER_STEPS_TIMELINE if timeline else WORKER_STEPS
                steps = max(20, budget // scale // workers)
                rate, wall = measure(trace, workers, policy, steps, timeline)
                print(
                    f"{policy:<10} {workers:>3} {str(timeline).lower():>8} {steps:>6} "
                    f"{wall:>8.2f} {rate:>10,.0f} {rate / raw:>6.2f}",
                    flush=True,
                )


class EffectsRow(NamedTuple):
    """One --effects measurement: ops per CPU second and per wall second."""

    ops: int
    cpu_s: float
    wall_s: float


def measure_effects(trace: Trace, workers: int, arch: str, steps: int, effects: bool) -> EffectsRow:
    """One run on the veth-1gbit network, with or without its flow weights and transfer CPU."""
    mode = "async" if arch == "ps-async" else "sync"
    ring = arch == "ring"
    config = SimulationConfig(
        workers=workers,
        bandwidth_bps=VETH_BANDWIDTH_BPS,
        latency_s=VETH_LATENCY_S,
        arch="allreduce" if ring else "ps",
        mode=mode,
        steps=steps,
        warmup_steps=min(50, steps // 5),
        seed=1,
        flow_weight_cv=VETH_FLOW_WEIGHT_CV if effects and not ring else 0.0,
        comm_cpu_s_per_byte=VETH_COMM_CPU_S_PER_BYTE if effects else 0.0,
        host_cpu_cores=VETH_HOST_CPU_CORES if effects else None,
    )
    cpu = time.process_time()
    result = simulate(trace, config)
    return EffectsRow(result.simulated_ops, time.process_time() - cpu, result.wall_time_s)


def print_effects(trace: Trace, scale: int) -> None:
    """Ops per CPU second with the measured network's effects, and the cost factor of them."""
    print(
        f"{'veth-1gbit':<10} {'W':>3} {'steps':>6} {'effects':>7} {'cpu s':>7} {'wall s':>7} "
        f"{'ops/cpu-s':>10} {'cost':>6}"
    )
    for arch in ("ps-async", "ps-sync", "ring"):
        for workers in EFFECTS_WORKER_COUNTS:
            steps = max(20, EFFECTS_WORKER_STEPS // scale // workers)
            rows = {on: measure_effects(trace, workers, arch, steps, on) for on in (False, True)}
            for on, row in rows.items():
                cost = (row.cpu_s / rows[False].cpu_s) if on else 1.0
                print(
                    f"{arch:<10} {workers:>3} {steps:>6} {'on' if on else 'off':>7} "
                    f"{row.cpu_s:>7.2f} {row.wall_s:>7.2f} {row.ops / row.cpu_s:>10,.0f} "
                    f"{cost:>5.1f}x",
                    flush=True,
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a fifth of the steps, no target")
    parser.add_argument("--target", action="store_true", help="only 1000 steps x 16 workers, ps")
    parser.add_argument(
        "--effects",
        action="store_true",
        help="only the measured-network path (flow weights + transfer CPU) vs without it",
    )
    args = parser.parse_args()
    trace = load_resnet50()
    if args.effects:
        print(f"trace {trace.metadata.model_name}: {len(trace.ops)} ops/step")
        print_effects(trace, 5 if args.quick else 1)
        return
    raw = simpy_raw_rate()
    print(
        f"trace {trace.metadata.model_name}: {len(trace.layers)} layers, {len(trace.ops)} ops/step"
    )
    print(f"SimPy raw rate (process looping over timeouts): {raw:,.0f} events/s")
    if not args.target:
        print_table(trace, raw, 5 if args.quick else 1)
    if not args.quick:
        print_target(trace, raw)


if __name__ == "__main__":
    main()
