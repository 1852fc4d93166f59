"""Benchmark: the stopping rule against the fixed 1000 steps it replaced, on README examples.

For each case, prints the wall time, steps per worker, examples/s with its 95% CI and how the
rule stopped, once with the rule (``--precision 1%``, the default) and once with 1000 fixed
steps (warm-up 50, the old default); and whether each estimate lies in the other's CI. Wall
times depend on the machine's load; the figures to compare are within one run of this script.

    python tests/bench_precision.py            # all cases (minutes on a loaded 2-core VM)
    python tests/bench_precision.py cnn        # the cases whose name contains "cnn"
"""

from __future__ import annotations

import dataclasses
import sys
import time

from simcore.sim import PrecisionRule, SimulationConfig, SimulationResult, simulate
from simcore.sim.precision import simulate_to_precision
from simcore.trace.io import load_trace

CASES = {
    "cnn-b32 W=4 async 1Gbps": ("cnn-b32", SimulationConfig(workers=4, bandwidth_bps=1e9)),
    "cnn-b32 W=4 colocated 2 cores": (
        "cnn-b32",
        SimulationConfig(workers=4, colocated_workers=4, host_cpu_cores=2, worker_cpu_cores=2),
    ),
    "resnet50-b32 W=4 async 10Gbps": ("resnet50-b32", SimulationConfig(workers=4)),
    "resnet50-b32 W=8 sync fcfs 10Gbps": (
        "resnet50-b32",
        SimulationConfig(workers=8, mode="sync", sharing="fcfs"),
    ),
}


def line(label: str, result: SimulationResult, wall_s: float) -> str:
    est = result.examples_per_s
    s = result.stopping
    how = "fixed" if s is None else f"{s.reason}, +-{100 * s.precision:.2g}%, {s.rounds} runs"
    return (
        f"  {label:<6} {wall_s:7.1f} s  {result.config.steps:5d} steps  {est.value:10.4g} "
        f"({est.ci_low:.4g} .. {est.ci_high:.4g})  {how}"
    )


def inside(value: float, result: SimulationResult) -> bool:
    est = result.examples_per_s
    return est.ci_low is not None and est.ci_high is not None and est.ci_low <= value <= est.ci_high


def main(pattern: str = "") -> None:
    for name, (trace_name, base) in CASES.items():
        if pattern not in name:
            continue
        trace = load_trace(trace_name)
        config = dataclasses.replace(base, replications=None)
        print(name)
        started = time.perf_counter()
        ruled = simulate_to_precision(trace, config, PrecisionRule())
        print(line("rule", ruled, time.perf_counter() - started))
        started = time.perf_counter()
        fixed = simulate(trace, dataclasses.replace(config, steps=1000, warmup_steps=50))
        print(line("1000", fixed, time.perf_counter() - started))
        print(
            f"  rule's value in the 1000-step CI: {inside(ruled.examples_per_s.value, fixed)}; "
            f"1000-step value in the rule's CI: {inside(fixed.examples_per_s.value, ruled)}"
        )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
