"""Benchmark of loading big traces (a script; pytest does not collect it): is loading linear?

Writes chain traces of 1,000 to 125,000 ops (a chain of layers, each with a pull, forward,
backward, push and update: 5 ops per layer; the last size is 25,000 layers) and one wide trace
(one layer feeding N parallel layers that a last one joins) as JSON files, then times
``load_trace`` (read, decode, validate) on each and prints the time per op: a flat last column is
a linear loader. For the biggest chain it also times ``sgdsim trace show``'s summary, compiling
the step for the simulator, and a short simulation with 1 and 2 workers.

A size that takes longer than ``--budget`` seconds ends the curve (the loader before issue 15 was
quadratic or worse; its bigger sizes would not finish).

Usage::

    python tests/bench_trace_load.py               # the curve, then the biggest chain's rest
    python tests/bench_trace_load.py --budget 60   # allow slower sizes
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from simcore.cli.trace_cmd import format_summary
from simcore.sim import SimulationConfig, simulate
from simcore.sim.dag import compile_trace
from simcore.trace.io import load_trace
from simcore.trace.model import Trace
from simcore.trace.summary import summarize

CHAIN_OPS = (1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 100_000, 125_000)
WIDE_BRANCHES = 20_000  # parallel layers of the wide trace (5 ops each, plus 2 layers)
OPS_PER_LAYER = 5  # pull, forward, backward, push, update
LAYER_NBYTES = 4096
FORWARD_S = 1e-5
BACKWARD_S = 2e-5
UPDATE_S = 1e-6
BANDWIDTH_BPS = 10e9


def trace_document(inputs: list[list[int]], name: str) -> dict[str, Any]:
    """The JSON form of a parameter-server step over layers ``l0..``; ``inputs[i]`` feed ``li``.

    Built directly as JSON (not through ``simcore``), so that the benchmark times only the loader.
    """
    n = len(inputs)
    consumers: list[list[int]] = [[] for _ in range(n)]
    for i, srcs in enumerate(inputs):
        for s in srcs:
            consumers[s].append(i)
    ops: list[dict[str, Any]] = []
    durations: list[float | None] = []

    def op(kind: str, resource: str, i: int, deps: list[str], duration: float | None) -> None:
        entry: dict[str, Any] = {"id": f"{kind}:l{i}", "resource": resource, "kind": kind}
        entry["layer"] = f"l{i}"
        if resource in ("downlink", "uplink"):
            entry["nbytes"] = LAYER_NBYTES
        entry["deps"] = deps
        ops.append(entry)
        durations.append(duration)

    for i in range(n):
        op("pull", "downlink", i, [], None)
    for i in range(n):
        op("forward", "worker", i, [f"forward:l{s}" for s in inputs[i]] + [f"pull:l{i}"], FORWARD_S)
    for i in reversed(range(n)):
        after = [f"backward:l{c}" for c in consumers[i]] or [f"forward:l{i}"]
        op("backward", "worker", i, after, BACKWARD_S)
        op("push", "uplink", i, [f"backward:l{i}"], None)
        op("update", "ps", i, [f"push:l{i}"], UPDATE_S)
    layer_params = [
        {"name": "w", "shape": [LAYER_NBYTES // 4], "dtype": "float32", "nbytes": LAYER_NBYTES}
    ]
    return {
        "schema": "sgdsim.trace",
        "schema_version": 1,
        "metadata": {
            "model_name": name,
            "batch_size": 1,
            "device": "synthetic",
            "dtype": "float32",
            "framework": "none",
            "framework_version": "0",
            "profiled_steps": 1,
            "warmup_steps": 0,
        },
        "layers": [
            {"name": f"l{i}", "module_type": "Synthetic", "params": layer_params} for i in range(n)
        ],
        "ops": ops,
        "steps": [{"duration_s": durations}],
    }


def chain(n_layers: int) -> list[list[int]]:
    return [[i - 1] if i else [] for i in range(n_layers)]


def wide(branches: int) -> list[list[int]]:
    """Layer 0 feeds layers 1..branches, which the last layer joins."""
    return [[], *([[0]] * branches), list(range(1, branches + 1))]


def timed_load(doc: dict[str, Any], folder: Path, name: str) -> tuple[Trace, str]:
    """Load a file of ``doc``; the row of figures: ops, wall and CPU seconds, CPU us per op."""
    path = folder / f"{name}.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    wall, cpu = time.perf_counter(), time.process_time()
    trace = load_trace(path)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    n = len(trace.ops)
    return trace, f"{n:>8} {wall:>8.3f} {cpu:>8.3f} {1e6 * cpu / n:>9.1f}"


def print_curve(folder: Path, budget_s: float) -> Trace | None:
    """Load time per chain size (and the wide trace); the biggest chain loaded."""
    print("load + validate (a busy machine slows wall time; CPU time is this process's own)")
    print(f"{'trace':<6} {'ops':>8} {'wall s':>8} {'cpu s':>8} {'cpu us/op':>9}", flush=True)
    biggest = None
    for n_ops in CHAIN_OPS:
        doc = trace_document(chain(n_ops // OPS_PER_LAYER), "chain")
        start = time.perf_counter()
        trace, row = timed_load(doc, folder, "c")
        print(f"{'chain':<6} {row}", flush=True)
        biggest = trace
        if time.perf_counter() - start > budget_s:
            print(f"  (over the {budget_s:g} s budget: bigger sizes skipped)", flush=True)
            break
    return biggest


def print_wide(folder: Path, branches: int) -> None:
    """Load time of the wide trace: a layer with ``branches`` consumers, a join of them all."""
    _, row = timed_load(trace_document(wide(branches), "wide"), folder, "w")
    print(f"{'wide':<6} {row}", flush=True)


class _Timer:
    """Wall and CPU seconds of a ``with`` block, as text."""

    def __enter__(self) -> _Timer:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *_: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu

    def __str__(self) -> str:
        return f"{self.wall:.3f} s wall, {self.cpu:.3f} s CPU"


def print_rest(trace: Trace, steps: int) -> None:
    """Summary, compilation and a short simulation of ``trace``."""
    n = len(trace.ops)
    with _Timer() as timer:
        format_summary(trace, summarize(trace), 10)
    print(f"summary (trace show) of {n} ops: {timer}", flush=True)
    config = SimulationConfig(
        workers=1, bandwidth_bps=BANDWIDTH_BPS, steps=steps, warmup_steps=0, batches=2
    )
    with _Timer() as timer:
        compile_trace(trace, config)
    print(f"compile for the simulator: {timer}", flush=True)
    for workers in (1, 2):
        config = SimulationConfig(
            workers=workers, bandwidth_bps=BANDWIDTH_BPS, steps=steps, warmup_steps=0, batches=2
        )
        with _Timer() as timer:
            result = simulate(trace, config)
        print(
            f"simulate W={workers}, {steps} steps: {timer} in all "
            f"({result.simulated_ops:,} ops, engine {result.ops_per_wall_s:,.0f} ops/s), "
            f"step {result.mean_step_s:.4f} s",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=30.0, help="seconds per size at most")
    parser.add_argument("--steps", type=int, default=4, help="steps of the short simulation")
    parser.add_argument(
        "--wide", type=int, default=WIDE_BRANCHES, help="parallel layers of the wide trace"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        biggest = print_curve(Path(tmp), args.budget)
        if biggest is None:
            sys.exit("no trace loaded")
        print_rest(biggest, args.steps)
        print_wide(Path(tmp), args.wide)


if __name__ == "__main__":
    main()
