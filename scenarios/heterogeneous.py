"""Slow workers and per-flow bandwidth caps: who sets the pace, and who can fill the link?

Question
    (a) Heterogeneous workers (TPDS'22 4.2.3): a job mixes fast workers with slow ones (the
        paper mixes V100 and T4 GPUs, about 2x apart). Sync-SGD waits at every barrier for the
        slowest worker; Async-SGD lets each worker run at its own pace. How does throughput fall
        as slow workers replace fast ones, in the simulator and in the coarse models (which take
        one worker type per kind of machine)?
    (b) Per-flow caps (TPDS'22 4.4): on AWS p3.16xlarge a single TCP flow gets at most 10 Gbit/s
        of the 25 Gbit/s NIC. With few workers the link then cannot be filled: one flow uses
        10 of 25 Gbit/s; from three concurrent flows on (25/3 < 10) the cap stops mattering. How
        much throughput does the cap cost, and up to which W?

Setup
    - trace: the shipped ``resnet18-b32`` sample (44.6 MiB of parameters, 2.5 s of CPU compute
      per step), one parameter server, processor sharing on its link. Each simulation runs
      until the 95% confidence interval of its examples/s is within ``--precision`` (1%; at
      most ``--max-steps`` 1000 steps per worker; ``--steps`` fixes the length), a tenth of each
      run left out as warm-up, or more where the run shows a longer start-up transient: (b)'s
      Async-SGD workers start bunched and stay so for hundreds of steps, which the rule finds
      (:mod:`simcore.sim.settling`) and runs past. A part's simulations run at once on the
      cores ``--jobs`` allows;
    - (a) ``MIX_WORKERS`` = 8 workers on a 10 Gbit/s link (so that computation, not the network,
      sets the pace), of which k = 0..8 are slow: they compute at ``SLOW_SPEED`` = 0.5 of the
      profiled speed (``speed_factors``; server updates unchanged). Async- and Sync-SGD. Coarse
      models: a ``Cluster`` of two ``WorkerType``s, the hybrid (Eq. 5 / Eq. 9) and the overlap
      correction (Eq. 6 / Eq. 10), since the simulator overlaps transfers with computation;
    - (b) an emulated GPU worker: the profiled CPU compute made ``GPU_SPEEDUP`` = 50x faster
      (``speed_factors``; about 51 ms per step instead of 2.5 s; server updates stay as profiled,
      15 ms), so that moving the model (15 ms at 25 Gbit/s, 37 ms at 10 Gbit/s, each way) matters;
      a 25 Gbit/s server link with and without a 10 Gbit/s per-flow cap (``flow_cap_bps``,
      ``cap_mode="clip"`` as in the paper), W = 1..10, Async- and Sync-SGD. Beside them the coarse
      hybrid + overlap prediction, which like the paper's models knows no cap, and the link bound
      ``batch x min(W x cap, B) / (8 M)`` examples/s: each worker-step moves the model's M bytes
      each way, and W flows capped at ``cap`` cannot move more than ``min(W x cap, B)`` bit/s.

    With mixed speeds, every Async-SGD worker runs the same number of steps, so the slow ones
    run their last steps after the fast ones have stopped, with less contention (SEMANTICS.md,
    "Estimates"); on the 10 Gbit/s link of (a) the network is lightly used and this is negligible.

Output
    Tables (a) throughput per number of slow workers, with the mean step time of the fast and
    the slow workers, and (b) throughput per W with and without the cap and the link
    utilization; a finding for each, and in the output folder (default ``results/heterogeneous/``)
    ``heterogeneous_mix.csv``, ``heterogeneous_mix.png``, ``heterogeneous_caps.csv`` and
    ``heterogeneous_caps.png``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from simcore.analytic import Cluster, WorkerType, predict_async, predict_sync
from simcore.analytic.params import worker_type_from_trace
from simcore.cli.progress import Progress
from simcore.errors import ConfigError
from simcore.plots import new_figure, save_figure
from simcore.report.scenario import (
    ScenarioOutput,
    base_config,
    finding_line,
    grouped_precision_notes,
    length_setup,
    positive_int,
    run_scenario,
    scenario_parser,
    simulate_points,
)
from simcore.report.table import Column, Table
from simcore.sim import Estimate, SimulationConfig, SimulationResult
from simcore.sim.config import CAP_MODES, MODES
from simcore.trace.io import load_trace
from simcore.trace.model import Trace
from simcore.units import format_bandwidth, parse_bandwidth

NAME = "heterogeneous"
TRACE = "resnet18-b32"
MIX_BANDWIDTH = "10Gbps"  # (a): the standard --bandwidth
MIX_WORKERS = 8
SLOW_SPEED = 0.5  # slow workers compute at half the profiled speed
CAP_WORKERS = tuple(range(1, 11))  # (b): the standard --workers
FAST_BANDWIDTH = "25Gbps"
FLOW_CAP = "10Gbps"
GPU_SPEEDUP = 50.0  # (b): compute 50x faster than the profiled CPU, to emulate a GPU worker
SEED = 1
MIX_CSV, MIX_PNG = "heterogeneous_mix.csv", "heterogeneous_mix.png"
CAPS_CSV, CAPS_PNG = "heterogeneous_caps.csv", "heterogeneous_caps.png"
FILES = (MIX_CSV, MIX_PNG, CAPS_CSV, CAPS_PNG)
MODE_LABELS = {"async": "Async-SGD", "sync": "Sync-SGD"}
COLORS = {"async": "tab:blue", "sync": "tab:red"}


def scaled(worker: WorkerType, speed: float, name: str) -> WorkerType:
    """``worker`` with forward and backward ``speed`` times faster (server update unchanged)."""
    return replace(
        worker, name=name, forward_s=worker.forward_s / speed, backward_s=worker.backward_s / speed
    )


def coarse(
    types: Sequence[tuple[WorkerType, int]], bandwidth_bps: float, mode: str
) -> dict[str, float]:
    """Coarse hybrid and overlap examples/s of a cluster; types with no worker are left out."""
    present = [(t, n) for t, n in types if n > 0]
    cluster = Cluster(tuple(t for t, _ in present), tuple(n for _, n in present), bandwidth_bps)
    pred: Any = predict_sync(cluster) if mode == "sync" else predict_async(cluster)
    return {"hybrid": pred.hybrid.examples_per_s, "overlap": pred.overlap.examples_per_s}


def mean_step_s(result: SimulationResult, workers: range) -> float | None:
    """Mean post-warm-up step time (s) of ``workers``, None when there are none."""
    steps = [result.workers[w].mean_step_s for w in workers]
    return float(np.mean(steps)) if steps else None


# ---- (a) fast and slow workers ---------------------------------------------------------------


@dataclass(frozen=True)
class MixPoint:
    """One mix: ``slow`` of ``workers`` are slow. Throughputs in examples/s, times in s."""

    workers: int
    slow: int
    sim: dict[str, Estimate]  # by mode
    coarse: dict[str, dict[str, float]]  # mode -> hybrid/overlap
    fast_step_s: dict[str, float | None]  # mode -> mean step of the fast workers
    slow_step_s: dict[str, float | None]


def mix_configs(base: SimulationConfig, args: argparse.Namespace) -> list[SimulationConfig]:
    """The simulations of (a): k = 0..W slow workers, each mode (in that order)."""
    w = args.mix_workers
    return [
        replace(base, workers=w, mode=mode, speed_factors=(1.0,) * (w - k) + (args.slow_speed,) * k)
        for k in range(w + 1)
        for mode in MODES
    ]


def mix_points(
    trace: Trace, args: argparse.Namespace, results: Sequence[SimulationResult]
) -> list[MixPoint]:
    """(a)'s points from the results of :func:`mix_configs`, in their order."""
    fast = worker_type_from_trace(trace)
    slow_type = scaled(fast, args.slow_speed, f"{fast.name} x{args.slow_speed:g}")
    w, points, runs = args.mix_workers, [], iter(results)
    for k in range(w + 1):
        sim, model, fast_s, slow_s = {}, {}, {}, {}
        for mode in MODES:
            result = next(runs)
            sim[mode] = result.examples_per_s
            model[mode] = coarse(((fast, w - k), (slow_type, k)), result.config.bandwidth_bps, mode)
            fast_s[mode] = mean_step_s(result, range(w - k))
            slow_s[mode] = mean_step_s(result, range(w - k, w))
        points.append(MixPoint(w, k, sim, model, fast_s, slow_s))
    return points


def mix_table(points: Sequence[MixPoint], slow_speed: float) -> Table:
    num, ci, sec = "", "±{:.2f}", ""  # "": units.format_number, as every table
    table = Table(
        f"(a) {points[0].workers} workers, k of them slow ({slow_speed:g}x the profiled compute "
        "speed): examples/s, and mean step time of the fast and slow workers (s)",
        [
            Column("slow_workers", "k"),
            Column("async_sim", "async sim", num),
            Column("async_sim_ci95", "95% CI", ci),
            Column("async_coarse_hybrid", "coarse (Eq.5)", num),
            Column("async_coarse_overlap", "coarse (Eq.6)", num),
            Column("async_fast_step_s", "fast step", sec),
            Column("async_slow_step_s", "slow step", sec),
            Column("sync_sim", "sync sim", num),
            Column("sync_sim_ci95", "95% CI", ci),
            Column("sync_coarse_hybrid", "coarse (Eq.9)", num),
            Column("sync_coarse_overlap", "coarse (Eq.10)", num),
            Column("sync_step_s", "sync step", sec),
        ],
    )
    for p in points:
        row: dict[str, Any] = {"slow_workers": p.slow}
        for mode in MODES:
            row[f"{mode}_sim"] = p.sim[mode].value
            row[f"{mode}_sim_ci95"] = p.sim[mode].half_width
            row[f"{mode}_coarse_hybrid"] = p.coarse[mode]["hybrid"]
            row[f"{mode}_coarse_overlap"] = p.coarse[mode]["overlap"]
        row["async_fast_step_s"] = p.fast_step_s["async"]
        row["async_slow_step_s"] = p.slow_step_s["async"]
        row["sync_step_s"] = sync_step(p)
        table.add(**row)
    return table


def sync_step(p: MixPoint) -> float:
    """The Sync-SGD step time (s): every worker's step ends at the same barrier."""
    step = p.fast_step_s["sync"] if p.fast_step_s["sync"] is not None else p.slow_step_s["sync"]
    assert step is not None  # a mix has at least one worker
    return step


def headline(mix: Sequence[MixPoint], caps: Sequence[CapPoint], cap_label: str) -> str:
    """The scenario's finding in one sentence: what one slow worker and what the cap cost."""
    first, one = mix[0], mix[1]

    def drop(mode: str) -> float:
        return 100 * (1 - one.sim[mode].value / first.sim[mode].value)

    return finding_line(
        f"one slow worker of {first.workers} costs Sync-SGD {drop('sync'):.0f}% of its "
        f"throughput but Async-SGD only {drop('async'):.1f}%, and a {cap_label} per-flow cap "
        f"costs a lone worker {100 * cap_loss(caps[0], 'async'):.0f}% (Async-SGD)."
    )


def mix_finding(points: Sequence[MixPoint], slow_speed: float) -> str:
    first, one, last = points[0], points[1], points[-1]

    def drop(mode: str, p: MixPoint) -> float:
        return 100 * (1 - p.sim[mode].value / first.sim[mode].value)

    expected = 100 * (1 - slow_speed) / first.workers
    growth = 100 * (sync_step(last) / sync_step(one) - 1)
    return (
        f"finding (a): one slow worker of {first.workers} costs Sync-SGD {drop('sync', one):.0f}% "
        f"(every barrier waits for it) but Async-SGD only {drop('async', one):.1f}% (the slow "
        f"worker's own lost rate, (1 - {slow_speed:g}) / {first.workers} = {expected:.1f}%); "
        f"all slow: -{drop('sync', last):.0f}% sync, -{drop('async', last):.0f}% async.\n"
        f"  The Sync-SGD step is {sync_step(one):.3g} s with one slow worker and "
        f"{sync_step(last):.3g} s with {last.slow} ({growth:+.1f}%): the barrier waits for the "
        f"slowest of k varying steps, which the coarse models (mean times) do not see."
    )


def plot_mix(points: Sequence[MixPoint], path: Path, title: str, *, overwrite: bool) -> None:
    fig, ax = new_figure(size=(7.5, 4.6))
    ks = [p.slow for p in points]
    for mode in MODES:
        est = [p.sim[mode] for p in points]
        color, label = COLORS[mode], MODE_LABELS[mode]
        ax.plot(ks, [e.value for e in est], "-o", ms=4, color=color, label=f"{label}, simulator")
        low = [e.ci_low if e.ci_low is not None else e.value for e in est]
        high = [e.ci_high if e.ci_high is not None else e.value for e in est]
        ax.fill_between(ks, low, high, color=color, alpha=0.2, lw=0)
        hybrid = [p.coarse[mode]["hybrid"] for p in points]
        overlap = [p.coarse[mode]["overlap"] for p in points]
        eqs = ("Eq. 9", "Eq. 10") if mode == "sync" else ("Eq. 5", "Eq. 6")
        ax.plot(ks, hybrid, "--", color=color, alpha=0.7, label=f"{label}, coarse ({eqs[0]})")
        ax.plot(ks, overlap, ":", color=color, lw=2, label=f"{label}, coarse overlap ({eqs[1]})")
    ax.set_xlabel(f"slow workers k (of {points[0].workers})")
    ax.set_ylabel("training throughput (examples/s)")
    ax.set_title(title, fontsize=9)
    ax.set_ylim(bottom=0)
    ax.set_xticks(ks)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7.5, loc="lower left", ncol=2)
    fig.tight_layout()
    save_figure(fig, path, overwrite=overwrite)


# ---- (b) per-flow caps -----------------------------------------------------------------------


@dataclass(frozen=True)
class CapPoint:
    """W workers on the fast link: throughput (examples/s) and link utilization per mode."""

    workers: int
    uncapped: dict[str, Estimate]
    capped: dict[str, Estimate]
    uncapped_rho: dict[str, float]
    capped_rho: dict[str, float]
    coarse: dict[str, float]  # mode -> coarse hybrid + overlap, no cap
    bound: float  # link bound with the cap, examples/s


def caps_configs(base: SimulationConfig, args: argparse.Namespace) -> list[SimulationConfig]:
    """The simulations of (b): per W, per mode, without and with the cap (in that order)."""
    return [
        replace(
            base,
            workers=w,
            mode=mode,
            speed_factors=(args.gpu_speedup,) * w,
            flow_cap_bps=flow_cap,
            bandwidth_bps=args.fast_bandwidth_bps,
            sharing=args.sharing,
            cap_mode=args.cap_mode,
        )
        for w in args.workers
        for mode in MODES
        for flow_cap in (None, args.flow_cap_bps)
    ]


def caps_points(
    trace: Trace, args: argparse.Namespace, results: Sequence[SimulationResult]
) -> list[CapPoint]:
    """(b)'s points from the results of :func:`caps_configs`, in their order."""
    gpu = scaled(worker_type_from_trace(trace), args.gpu_speedup, "gpu")
    b, cap = args.fast_bandwidth_bps, args.flow_cap_bps
    points, done = [], iter(results)
    for w in args.workers:
        runs: dict[str | None, dict[str, SimulationResult]] = {None: {}, "cap": {}}
        for mode in MODES:
            for key in (None, "cap"):
                runs[key][mode] = next(done)
        points.append(
            CapPoint(
                workers=w,
                uncapped={m: r.examples_per_s for m, r in runs[None].items()},
                capped={m: r.examples_per_s for m, r in runs["cap"].items()},
                uncapped_rho={m: busiest(r) for m, r in runs[None].items()},
                capped_rho={m: busiest(r) for m, r in runs["cap"].items()},
                coarse={m: coarse(((gpu, w),), b, m)["overlap"] for m in MODES},
                bound=gpu.batch_size * min(w * cap, b) / (8 * gpu.model_nbytes),
            )
        )
    return points


def busiest(result: SimulationResult) -> float:
    return max(link.utilization for link in result.links)


def caps_table(points: Sequence[CapPoint], cap_label: str) -> Table:
    num, ci, rho = "", "±{:.1f}", ""
    columns = [Column("workers", "W")]
    for mode in MODES:
        m = mode
        columns += [
            Column(f"{m}_no_cap", f"{m} no cap", num),
            Column(f"{m}_no_cap_ci95", "95% CI", ci),
            Column(f"{m}_cap", f"{m} cap", num),
            Column(f"{m}_cap_ci95", "95% CI", ci),
            Column(f"{m}_rho_no_cap", "rho no cap", rho),
            Column(f"{m}_rho_cap", "rho cap", rho),
            Column(f"{m}_coarse", "coarse", num),
        ]
    columns.append(Column("link_bound_cap", "bound (cap)", num))
    table = Table(
        f"(b) examples/s without and with a {cap_label} per-flow cap; rho: busier link's "
        "utilization; coarse: hybrid + overlap (Eq. 6 / Eq. 10), no cap",
        columns,
    )
    for p in points:
        row: dict[str, Any] = {"workers": p.workers, "link_bound_cap": p.bound}
        for mode in MODES:
            row[f"{mode}_no_cap"] = p.uncapped[mode].value
            row[f"{mode}_no_cap_ci95"] = p.uncapped[mode].half_width
            row[f"{mode}_cap"] = p.capped[mode].value
            row[f"{mode}_cap_ci95"] = p.capped[mode].half_width
            row[f"{mode}_rho_no_cap"] = p.uncapped_rho[mode]
            row[f"{mode}_rho_cap"] = p.capped_rho[mode]
            row[f"{mode}_coarse"] = p.coarse[mode]
        table.add(**row)
    return table


def cap_loss(p: CapPoint, mode: str) -> float:
    """Throughput lost to the cap, as a fraction of the uncapped throughput."""
    return 1 - p.capped[mode].value / p.uncapped[mode].value


def within_ci(a: Estimate, b: Estimate) -> bool:
    """True when the two 95% confidence intervals overlap."""
    if None in (a.ci_low, a.ci_high, b.ci_low, b.ci_high):
        return abs(a.value - b.value) <= 1e-9 * max(abs(a.value), 1.0)
    return not (a.ci_low > b.ci_high or b.ci_low > a.ci_high)  # type: ignore[operator]


def agreeing_from(points: Sequence[CapPoint], mode: str) -> int | None:
    """The smallest W from which on cap and no cap agree within their CIs at every W tried."""
    agree = None
    for p in reversed(points):
        if not within_ci(p.capped[mode], p.uncapped[mode]):
            break
        agree = p.workers
    return agree


def caps_finding(points: Sequence[CapPoint], cap_label: str, link_label: str) -> str:
    first, last = points[0], points[-1]
    lines = [
        f"finding (b): one worker loses {100 * cap_loss(first, 'async'):.0f}% to the cap: a lone "
        f"flow gets {cap_label} of {link_label} (link utilization "
        f"{first.capped_rho['async']:.2f} vs {first.uncapped_rho['async']:.2f} without the cap)."
    ]
    for mode in MODES:
        w = agreeing_from(points, mode)
        at = [str(p.workers) for p in points if within_ci(p.capped[mode], p.uncapped[mode])]
        if w is not None:
            agree = f"agree within their CIs from W = {w} on"
        elif at:
            agree = f"agree within their CIs only at W = {', '.join(at)}"
        else:
            agree = "never agree within their CIs"
        lines.append(
            f"  {MODE_LABELS[mode]}: cap and no cap {agree}; at W = {last.workers} the cap costs "
            f"{100 * cap_loss(last, mode):.1f}% (link utilization {last.capped_rho[mode]:.2f} "
            f"vs {last.uncapped_rho[mode]:.2f})."
        )
    return "\n".join(lines)


def plot_caps(
    points: Sequence[CapPoint], path: Path, title: str, cap_label: str, *, overwrite: bool
) -> None:
    fig, axes = new_figure(1, 2, size=(10.5, 4.4), sharey=True)
    ws = [p.workers for p in points]
    for ax, mode in zip(axes, MODES, strict=True):
        for est, style, color, label in (
            ([p.uncapped[mode] for p in points], "-o", "tab:green", "simulator, no cap"),
            ([p.capped[mode] for p in points], "-s", "tab:purple", f"simulator, {cap_label} cap"),
        ):
            ax.plot(ws, [e.value for e in est], style, ms=4, color=color, label=label)
            low = [e.ci_low if e.ci_low is not None else e.value for e in est]
            high = [e.ci_high if e.ci_high is not None else e.value for e in est]
            ax.fill_between(ws, low, high, color=color, alpha=0.2, lw=0)
        ax.plot(ws, [p.coarse[mode] for p in points], "--", color="0.4", label="coarse, no cap")
        ax.plot(ws, [p.bound for p in points], ":", color="k", label="link bound with the cap")
        ax.set_title(MODE_LABELS[mode], fontsize=9.5)
        ax.set_xlabel("workers W")
        ax.set_ylabel("training throughput (examples/s)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7.5, loc="lower right")
    fig.suptitle(title, fontsize=9.5)
    fig.tight_layout()
    save_figure(fig, path, overwrite=overwrite)


def mix_notes(mix: Sequence[MixPoint], results: Sequence[SimulationResult]) -> str:
    """``note:`` lines for the runs of (a) that stopped short of the precision target ('' if
    none); ``results`` in the order of :func:`mix_configs`."""
    mixes = [p for p in mix for _ in MODES]
    return grouped_precision_notes(
        ([r], f"(a) {MODE_LABELS[r.config.mode]}, k = {p.slow} slow")
        for p, r in zip(mixes, results, strict=True)
    )


# ---- command line ----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = scenario_parser(
        NAME,
        __doc__,
        trace=TRACE,
        workers=CAP_WORKERS,
        seed=SEED,
        bandwidth=MIX_BANDWIDTH,
        precision=True,
        help_texts={
            "workers": f"(b) worker counts, e.g. 1-16 or 1,2,4 (default 1-{CAP_WORKERS[-1]})",
            "bandwidth": f"(a) server link, e.g. 1Gbps (default {MIX_BANDWIDTH})",
        },
    )
    parser.description = (
        f"{parser.description} --bandwidth/--network set part (a)'s link (--latency applies to "
        "both parts); --workers is part (b)'s sweep."
    )
    mix = parser.add_argument_group("(a) fast and slow workers")
    mix.add_argument(
        "--mix-workers", type=positive_int, default=MIX_WORKERS, help="total workers (default 8)"
    )
    mix.add_argument(
        "--slow-speed",
        type=float,
        default=SLOW_SPEED,
        help=f"slow workers' compute speed relative to the profile (default {SLOW_SPEED})",
    )
    caps = parser.add_argument_group("(b) per-flow caps")
    caps.add_argument(
        "--fast-bandwidth",
        default=FAST_BANDWIDTH,
        help=f"server link (default {FAST_BANDWIDTH})",
    )
    caps.add_argument("--flow-cap", default=FLOW_CAP, help=f"per-flow cap (default {FLOW_CAP})")
    caps.add_argument(
        "--cap-mode",
        choices=CAP_MODES,
        default="clip",
        help="clip: min(share, cap), the rest unused (the paper; default); maxmin: others use it",
    )
    caps.add_argument(
        "--sharing", choices=("ps", "fcfs"), default="ps", help="link sharing (default ps)"
    )
    caps.add_argument(
        "--gpu-speedup",
        type=float,
        default=GPU_SPEEDUP,
        help=f"compute speed-up over the profile, to emulate a GPU (default {GPU_SPEEDUP:g})",
    )
    return parser.parse_args(argv)


def check_args(args: argparse.Namespace) -> None:
    """Parse the (b) bandwidths, check the speeds and (b)'s warm-up; ConfigError names the
    option."""
    args.fast_bandwidth_bps = parse_bandwidth(args.fast_bandwidth, name="--fast-bandwidth")
    args.flow_cap_bps = parse_bandwidth(args.flow_cap, name="--flow-cap")
    for name in ("slow_speed", "gpu_speedup"):
        value = getattr(args, name)
        if not (np.isfinite(value) and value > 0):
            raise ConfigError(f"--{name.replace('_', '-')}: must be a number > 0, got {value}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> None:
        check_args(args)
        out = ScenarioOutput(args.out, FILES, force=args.force)
        trace = load_trace(args.trace)
        base, link_label = base_config(args, sharing="ps")  # (a)'s link; (b) sets its own
        model = f"{trace.metadata.model_name}, batch {trace.metadata.batch_size}/worker"
        configs_a, configs_b = mix_configs(base, args), caps_configs(base, args)
        print(f"{model}; one PS; {length_setup(args)}")
        # Each part's points at once (--jobs)
        results_a = simulate_points(
            trace, configs_a, args, Progress("(a) mixes", "worker-steps", enabled=not args.quiet)
        )
        mix = mix_points(trace, args, results_a)
        mix_tab = mix_table(mix, args.slow_speed)
        print(f"\n{mix_tab.text()}\n{mix_finding(mix, args.slow_speed)}")
        if notes := mix_notes(mix, results_a):
            print(notes)
        results_b = simulate_points(
            trace, configs_b, args, Progress("(b) caps", "worker-steps", enabled=not args.quiet)
        )
        caps = caps_points(trace, args, results_b)
        cap_label = format_bandwidth(args.flow_cap_bps)
        fast_label = format_bandwidth(args.fast_bandwidth_bps)
        caps_tab = caps_table(caps, cap_label)
        print(
            f"\n(b) compute {args.gpu_speedup:g}x faster than profiled (an emulated GPU worker), "
            f"{fast_label} link, {args.sharing} sharing, cap mode {args.cap_mode}"
        )
        print(f"{caps_tab.text()}\n{caps_finding(caps, cap_label, fast_label)}\n")
        print(headline(mix, caps, cap_label) + "\n")
        out.write_csv(MIX_CSV, mix_tab)
        out.write_csv(CAPS_CSV, caps_tab)
        mix_title = (
            f"{model}, {args.mix_workers} workers, slow ones at {args.slow_speed:g}x speed, "
            f"{link_label}, PS"
        )
        plot_mix(mix, out.path(MIX_PNG), mix_title, overwrite=out.force)
        caps_title = (
            f"{model}, compute {args.gpu_speedup:g}x faster (emulated GPU), {fast_label} link, "
            f"{cap_label} per-flow cap ({args.cap_mode}), {args.sharing}"
        )
        plot_caps(caps, out.path(CAPS_PNG), caps_title, cap_label, overwrite=out.force)
        print(out.summary())

    return run_scenario(NAME, body, args)


if __name__ == "__main__":
    sys.exit(main())
