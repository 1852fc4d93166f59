"""FCFS or processor sharing: at what network utilization does the choice change the prediction?

Question
    Workers share the parameter server's link. TPDS'22 (section 2.1) models that link either as
    FCFS (one transfer at a time, at full bandwidth: right when the network is lightly loaded and
    transfers rarely meet) or as processor sharing (PS, n transfers at B/n each: right when the
    link is busy), and its hybrid model switches from the first to the second when the FCFS
    model's link utilization exceeds rho_T (0.6 on its GPU cluster). As W grows and the link
    fills up, where do the FCFS and PS predictions part ways, in the fine-grained simulator and
    in the coarse-grained models, and is that near rho_T?

Setup
    - trace: the shipped ``resnet18-b32`` sample (44.6 MiB of parameters, 2.5 s of CPU compute
      per step), one parameter server behind a 1 Gbit/s link: one worker keeps the link about
      11% busy, so W = 1..16 sweeps the utilization from low to saturation;
    - Async-SGD by default (``--mode sync`` for Sync-SGD); each W runs until the 95% confidence
      interval of its examples/s (the simulator's hybrid, which holds the FCFS and the PS run) is
      within ``--precision`` (1%; at most ``--max-steps`` 1000 steps per worker; ``--steps``
      fixes the length), the first ``WARMUP_STEPS`` (100) steps per worker of every run left
      out (``--warmup``; with ``--steps``, a tenth of the run); all W run at once on the cores
      ``--jobs`` allows;
    - simulator (fine-grained, layer by layer, so transfers overlap computation): sharing
      ``fcfs``, ``ps`` and ``hybrid``;
    - coarse-grained models (``simcore.analytic``, no latency term): Async-SGD by mean value
      analysis of TPDS'22 Fig. 5 (Eq. 3 FCFS, Eq. 4 PS, Eq. 5 hybrid, Eq. 6 overlap), Sync-SGD by
      Eq. 8 (FCFS), 7 (PS), 9 (hybrid), 10 (overlap).

    "Hybrid" means three different things here, so the table labels it:
    the simulator's hybrid is the mean of its FCFS and PS *throughputs* (SEMANTICS.md; both runs
    use the same seeds); the coarse Async-SGD hybrid (Eq. 5) *picks* the FCFS solution while its
    link utilization rho^FCFS <= rho_T and the PS solution above (the ``pick`` column); the coarse
    Sync-SGD hybrid (Eq. 9) is the mean of the two *step times*.

    TPDS'22 Fig. 9 compares the Sync-SGD PS, FCFS and hybrid models with measurements against W;
    the view of the FCFS vs PS difference against link utilization is this scenario's own, on
    the quantity that Eq. 5 compares with rho_T: the utilization of the busier server link
    (downlink or uplink) under FCFS. For the simulator it is measured over the steady-state
    window (``result.links`` of the FCFS run); for the coarse models it is the FCFS solution's
    throughput (steps/s) x 8 M / B.

    Why the two can disagree in sign: the simulator moves the model layer by layer and starts a
    layer's forward pass as soon as its parameters arrive. Under PS every worker receives its
    first layers early and computes while the rest arrives; under FCFS a worker whose pulls
    queue behind another's waits idle. The coarse models move the model as one block before
    computing (no overlap), where FCFS is never slower than PS.

Output
    Two tables (throughput of the six predictions plus the coarse overlap correction; link
    utilization and the relative difference FCFS vs PS), the first W and utilization at which
    FCFS and PS differ by more than 5%, a one-line finding, and in the output folder (default
    ``results/sharing_policies/``) ``sharing_policies_throughput.csv``,
    ``sharing_policies_difference.csv``, ``sharing_policies_throughput.png`` (throughput vs W) and
    ``sharing_policies_difference.png`` (FCFS vs PS difference against link utilization).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from simcore.analytic import Cluster, WorkerType, predict_async, predict_sync
from simcore.analytic.async_model import DEFAULT_RHO_T
from simcore.analytic.params import worker_type_from_trace
from simcore.cli.progress import Progress
from simcore.errors import ConfigError
from simcore.plots import new_figure, save_figure
from simcore.report.scenario import (
    ScenarioOutput,
    base_config,
    length_setup,
    precision_notes,
    run_scenario,
    scenario_parser,
    simulate_points,
)
from simcore.report.table import Column, Table
from simcore.sim import Estimate, SimulationResult
from simcore.sim.config import MODES
from simcore.trace.io import load_trace

NAME = "sharing_policies"
TRACE = "resnet18-b32"
BANDWIDTH = "1Gbps"
WORKERS = tuple(range(1, 17))
# Workers start in lock-step; on a saturated PS link they stay bunched (pulling together,
# computing together) for tens of steps before drifting apart. The stopping rule's own warm-up
# (a tenth of the run, at least 2.5 steps per worker: 40 of 400 steps at W = 16) leaves that
# transient in the estimate (PS at W = 16: 83.8 examples/s +-1.5% instead of 85.6); 100 steps
# remove it. So every run of the rule leaves out 100 steps, unless --warmup says otherwise.
WARMUP_STEPS = 100
SEED = 1
DIFF_THRESHOLD = 0.05  # "FCFS and PS part ways": relative difference above 5%
NEAR_RHO_T = 0.1  # a utilization within 0.1 of rho_T counts as "near" it
THROUGHPUT_CSV = "sharing_policies_throughput.csv"
DIFFERENCE_CSV = "sharing_policies_difference.csv"
THROUGHPUT_PNG = "sharing_policies_throughput.png"
DIFFERENCE_PNG = "sharing_policies_difference.png"
FILES = (THROUGHPUT_CSV, DIFFERENCE_CSV, THROUGHPUT_PNG, DIFFERENCE_PNG)
POLICIES = ("fcfs", "ps", "hybrid")
COLORS = {"fcfs": "tab:blue", "ps": "tab:orange", "hybrid": "tab:green", "overlap": "0.45"}
LABELS = {"fcfs": "FCFS", "ps": "PS", "hybrid": "hybrid"}


@dataclass(frozen=True)
class Point:
    """Every prediction at one worker count. Throughputs in examples/s."""

    workers: int
    result: SimulationResult  # the simulator's hybrid run (its components: FCFS and PS)
    sim: dict[str, Estimate]  # fcfs, ps, hybrid
    sim_rho: dict[str, float]  # fcfs, ps: busier link's utilization
    coarse: dict[str, float]  # fcfs, ps, hybrid, overlap
    coarse_rho_fcfs: float
    coarse_pick: str  # what the coarse hybrid is: "fcfs"/"ps" (Eq. 5) or "mean" (Eq. 9)

    def sim_diff(self) -> float:
        """(X_FCFS - X_PS) / X_PS of the simulator."""
        return self.sim["fcfs"].value / self.sim["ps"].value - 1.0

    def coarse_diff(self) -> float:
        return self.coarse["fcfs"] / self.coarse["ps"] - 1.0

    def sim_separated(self) -> bool:
        """True when the FCFS and PS confidence intervals do not overlap."""
        f, p = self.sim["fcfs"], self.sim["ps"]
        if None in (f.ci_low, f.ci_high, p.ci_low, p.ci_high):
            return f.value != p.value
        return f.ci_low > p.ci_high or p.ci_low > f.ci_high  # type: ignore[operator]


def busiest_utilization(result: SimulationResult) -> float:
    return max(link.utilization for link in result.links)


def simulator_values(result: SimulationResult) -> tuple[dict[str, Estimate], dict[str, float]]:
    """The simulator's FCFS, PS and hybrid estimates and the FCFS and PS runs' utilization,
    from one hybrid run (it holds both components, simulated with the same seeds)."""
    parts = {c.config.sharing: c for c in result.components}
    sim = {"hybrid": result.examples_per_s} | {k: parts[k].examples_per_s for k in ("fcfs", "ps")}
    rho = {k: busiest_utilization(parts[k]) for k in ("fcfs", "ps")}
    return sim, rho


@dataclass(frozen=True)
class Coarse:
    """The coarse models at one W: examples/s by model, rho^FCFS and what the hybrid is."""

    values: dict[str, float]  # fcfs, ps, hybrid, overlap
    rho_fcfs: float
    pick: str


def coarse_point(worker: WorkerType, workers: int, b: float, mode: str, rho_t: float) -> Coarse:
    """The coarse models' FCFS, PS, hybrid and overlap examples/s, rho^FCFS and the pick."""
    cluster = Cluster.homogeneous(worker, workers, b)
    transfer_s = worker.transfer_s(b)  # utilization = steps/s x M/B
    models = ("fcfs", "ps", "hybrid", "overlap")
    if mode == "sync":
        s = predict_sync(cluster)
        values = {k: getattr(s, k).examples_per_s for k in models}
        return Coarse(values, s.fcfs.steps_per_s * transfer_s, "mean")
    a = predict_async(cluster, rho_t=rho_t)
    values = {k: getattr(a, k).examples_per_s for k in models}
    return Coarse(values, a.fcfs.steps_per_s * transfer_s, a.hybrid.links)


def run(args: argparse.Namespace) -> tuple[list[Point], str]:
    """Simulate and solve every worker count; returns the points and a one-line setup."""
    trace = load_trace(args.trace)
    # One hybrid run per W holds the FCFS and the PS run; the stopping rule sizes it (the
    # hybrid's examples/s is the mean of theirs) unless --steps fixes the length.
    base, link_label = base_config(args, mode=args.mode, sharing="hybrid")
    worker = worker_type_from_trace(trace)
    mode = "Sync-SGD" if args.mode == "sync" else "Async-SGD"
    setup = (
        f"{trace.metadata.model_name}, batch {trace.metadata.batch_size}/worker, "
        f"{trace.param_nbytes / 2**20:.1f} MiB of parameters; {mode}, one PS, {link_label}"
    )
    progress = Progress("simulating", "worker-steps", enabled=not args.quiet)
    configs = [replace(base, workers=w) for w in args.workers]
    results = simulate_points(trace, configs, args, progress)  # all at once: --jobs
    points = []
    for w, result in zip(args.workers, results, strict=True):
        sim, rho = simulator_values(result)
        coarse = coarse_point(worker, w, base.bandwidth_bps, args.mode, args.rho_t)
        points.append(Point(w, result, sim, rho, coarse.values, coarse.rho_fcfs, coarse.pick))
    return points, setup


def throughput_table(points: Sequence[Point], mode: str) -> Table:
    hybrid = "Eq. 9: mean step time" if mode == "sync" else "Eq. 5: pick by rho^FCFS"
    overlap = "Eq. 10" if mode == "sync" else "Eq. 6"
    num, ci = "{:.2f}", "±{:.2f}"
    table = Table(
        "Throughput (examples/s); sim hybrid = mean of sim FCFS and PS throughputs, "
        f"coarse hybrid = {hybrid}",
        [
            Column("workers", "W"),
            Column("sim_fcfs", "sim FCFS", num),
            Column("sim_fcfs_ci95", "95% CI", ci),
            Column("sim_ps", "sim PS", num),
            Column("sim_ps_ci95", "95% CI", ci),
            Column("sim_hybrid", "sim hybrid", num),
            Column("sim_hybrid_ci95", "95% CI", ci),
            Column("coarse_fcfs", "coarse FCFS", num),
            Column("coarse_ps", "coarse PS", num),
            Column("coarse_hybrid", "coarse hybrid", num),
            Column("coarse_pick", "pick"),
            Column("coarse_overlap", f"coarse overlap ({overlap})", num),
            Column("steps", "steps", "{}"),
        ],
    )
    for p in points:
        sims: dict[str, Any] = {}
        for k in POLICIES:
            sims[f"sim_{k}"] = p.sim[k].value
            sims[f"sim_{k}_ci95"] = p.sim[k].half_width
        coarse = {f"coarse_{k}": v for k, v in p.coarse.items()}
        table.add(
            workers=p.workers,
            coarse_pick=p.coarse_pick,
            **sims,
            **coarse,
            steps=p.result.config.steps,
        )
    return table


def difference_table(points: Sequence[Point]) -> Table:
    pct = "{:+.1f}"
    table = Table(
        "Link utilization rho (busier server link) and FCFS vs PS difference (X_FCFS/X_PS - 1)",
        [
            Column("workers", "W"),
            Column("sim_rho_fcfs", "sim rho FCFS"),
            Column("sim_rho_ps", "sim rho PS"),
            Column("coarse_rho_fcfs", "coarse rho FCFS"),
            Column("sim_diff_pct", "sim diff %", pct),
            Column("sim_cis_apart", "sim CIs apart"),
            Column("coarse_diff_pct", "coarse diff %", pct),
        ],
    )
    for p in points:
        table.add(
            workers=p.workers,
            sim_rho_fcfs=p.sim_rho["fcfs"],
            sim_rho_ps=p.sim_rho["ps"],
            coarse_rho_fcfs=p.coarse_rho_fcfs,
            sim_diff_pct=100 * p.sim_diff(),
            sim_cis_apart="yes" if p.sim_separated() else "no",
            coarse_diff_pct=100 * p.coarse_diff(),
        )
    return table


def first_divergence(diffs: Sequence[float], threshold: float = DIFF_THRESHOLD) -> int | None:
    """Index of the first relative difference above ``threshold`` in size, or None."""
    return next((i for i, d in enumerate(diffs) if abs(d) > threshold), None)


def divergence_text(name: str, points: Sequence[Point], rho_t: float, mode: str) -> str:
    sim = name == "simulator"
    diffs = [p.sim_diff() if sim else p.coarse_diff() for p in points]
    i = first_divergence(diffs)
    if i is None:
        return f"{name}: FCFS and PS stay within {DIFF_THRESHOLD:.0%} of each other at every W"
    p = points[i]
    rho = p.sim_rho["fcfs"] if sim else p.coarse_rho_fcfs
    near = "near" if abs(rho - rho_t) <= NEAR_RHO_T else "not near"
    if mode == "sync":
        near = "compare: Async-SGD's Eq. 5 switches at"  # Eq. 9 has no threshold
    ci = (", 95% CIs " + ("apart" if p.sim_separated() else "overlapping")) if sim else ""
    return (
        f"{name}: FCFS and PS first differ by more than {DIFF_THRESHOLD:.0%} at W = "
        f"{p.workers} ({100 * diffs[i]:+.1f}%{ci}), where rho^FCFS = {rho:.2f}: {near} "
        f"rho_T = {rho_t:g}"
    )


def finding(points: Sequence[Point]) -> str:
    """Where each model's FCFS and PS agree, and the largest gap each way."""
    sim = [p.sim_diff() for p in points]
    coarse = [p.coarse_diff() for p in points]
    i = first_divergence(sim)
    agree = points[-1] if i is None else points[max(i - 1, 0)]
    lo, hi = min(range(len(sim)), key=sim.__getitem__), max(range(len(sim)), key=sim.__getitem__)
    j = max(range(len(coarse)), key=lambda k: abs(coarse[k]))
    ps_ahead = (
        f"PS is ahead by up to {-100 * sim[lo]:.1f}% (W = {points[lo].workers})"
        if sim[lo] < 0
        else "PS is never ahead"
    )
    fcfs_ahead = (
        f"FCFS by up to {100 * sim[hi]:.1f}% (W = {points[hi].workers}, "
        f"rho^FCFS = {points[hi].sim_rho['fcfs']:.2f})"
        if sim[hi] > 0
        else "FCFS never"
    )
    return (
        f"finding: the simulator's FCFS and PS agree within {DIFF_THRESHOLD:.0%} up to "
        f"rho^FCFS = {agree.sim_rho['fcfs']:.2f} (W = {agree.workers}); {ps_ahead}, "
        f"{fcfs_ahead}.\n"
        f"         The coarse models (no overlap of transfers and compute) put FCFS "
        f"{'ahead' if coarse[j] >= 0 else 'behind'}, by up to {100 * abs(coarse[j]):.1f}% "
        f"(W = {points[j].workers})."
    )


def plot_throughput(points: Sequence[Point], path: Path, title: str, *, overwrite: bool) -> None:
    fig, ax = new_figure(size=(7.5, 4.6))
    ws = [p.workers for p in points]
    for k in POLICIES:
        est = [p.sim[k] for p in points]
        ax.plot(ws, [e.value for e in est], "-o", ms=3.5, color=COLORS[k], label=f"sim {LABELS[k]}")
        low = [e.ci_low if e.ci_low is not None else e.value for e in est]
        high = [e.ci_high if e.ci_high is not None else e.value for e in est]
        ax.fill_between(ws, low, high, color=COLORS[k], alpha=0.18, lw=0)
    for k in POLICIES:
        ys = [p.coarse[k] for p in points]
        ax.plot(ws, ys, "--s", ms=3, mfc="none", color=COLORS[k], label=f"coarse {LABELS[k]}")
    overlap = [p.coarse["overlap"] for p in points]
    ax.plot(ws, overlap, ":", color=COLORS["overlap"], label="coarse hybrid + overlap")
    ax.set_xlabel("workers W")
    ax.set_ylabel("training throughput (examples/s)")
    ax.set_title(title, fontsize=9.5)
    ax.set_xlim(0, max(ws) + 0.5)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7.5, loc="lower right", ncol=2)
    fig.tight_layout()
    save_figure(fig, path, overwrite=overwrite)


def plot_difference(
    points: Sequence[Point], path: Path, title: str, rho_t: float, *, overwrite: bool
) -> None:
    """Left: the TPDS'22 view, difference against utilization; right: the same against W."""
    fig, (by_rho, by_w) = new_figure(1, 2, size=(10.0, 4.4), sharey=True)
    ws = [p.workers for p in points]
    sim_y = [100 * p.sim_diff() for p in points]
    coarse_y = [100 * p.coarse_diff() for p in points]
    limit = 100 * DIFF_THRESHOLD
    for ax in (by_rho, by_w):
        ax.axhspan(-limit, limit, color="0.9", label=f"within ±{limit:.0f}%")
        ax.grid(alpha=0.3)
    by_rho.axvline(rho_t, color="0.3", ls="--", lw=1, label=rf"$\rho_T$ = {rho_t:g} (TPDS'22)")
    sim_x = [p.sim_rho["fcfs"] for p in points]
    coarse_x = [p.coarse_rho_fcfs for p in points]
    by_rho.plot(sim_x, sim_y, "-o", ms=4, color="tab:purple", label="simulator")
    by_rho.plot(coarse_x, coarse_y, "--s", ms=4, color="tab:brown", label="coarse models")
    for i in (0, len(points) - 1):  # label the ends; the upper curve's label above, the other below
        sim_above = sim_y[i] > coarse_y[i]
        for x, y, above in (
            (sim_x[i], sim_y[i], sim_above),
            (coarse_x[i], coarse_y[i], not sim_above),
        ):
            offset = (-24, 6) if above else (-24, -13)
            by_rho.annotate(
                f"W={ws[i]}", (x, y), xytext=offset, textcoords="offset points", fontsize=7.5
            )
    by_rho.set_xlabel(r"link utilization $\rho^{FCFS}$ (busier server link)")
    for ax in (by_rho, by_w):
        ax.set_ylabel(r"FCFS vs PS: $X_{FCFS} / X_{PS} - 1$ (%)")
    by_rho.set_title("against link utilization (Eq. 5's criterion)", fontsize=9)
    by_rho.set_xlim(0, 1.05)
    by_rho.legend(fontsize=7.5, loc="upper left")
    by_w.plot(ws, sim_y, "-o", ms=4, color="tab:purple", label="simulator")
    by_w.plot(ws, coarse_y, "--s", ms=4, color="tab:brown", label="coarse models")
    by_w.set_xlabel("workers W")
    by_w.set_title("against the number of workers", fontsize=9)
    by_w.legend(fontsize=7.5, loc="upper left")
    fig.suptitle(title, fontsize=9.5)
    fig.tight_layout()
    save_figure(fig, path, overwrite=overwrite)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = scenario_parser(
        NAME,
        __doc__,
        trace=TRACE,
        workers=WORKERS,
        seed=SEED,
        bandwidth=BANDWIDTH,
        precision=True,
        help_texts={
            "warmup": f"steps per worker left out (default: {WARMUP_STEPS} with the stopping "
            "rule, since workers that start together stay bunched on a saturated link for tens "
            "of steps; a tenth of the run with --steps)"
        },
    )
    parser.add_argument("--mode", choices=MODES, default="async", help="Async- or Sync-SGD")
    parser.add_argument(
        "--rho-t",
        type=float,
        default=DEFAULT_RHO_T,
        help=f"coarse Async-SGD hybrid threshold (Eq. 5; default {DEFAULT_RHO_T})",
    )
    args = parser.parse_args(argv)
    cap = args.max_steps
    if args.warmup is None and args.steps is None and (cap is None or cap > 2 * WARMUP_STEPS):
        args.warmup = WARMUP_STEPS  # the rule keeps it for every run
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> None:
        if not (math.isfinite(args.rho_t) and 0 <= args.rho_t <= 1):
            raise ConfigError(f"--rho-t: must be a number in [0, 1], got {args.rho_t}")
        out = ScenarioOutput(args.out, FILES, force=args.force)
        points, setup = run(args)
        throughput, difference = throughput_table(points, args.mode), difference_table(points)
        length = length_setup(args)
        if args.steps is None and args.warmup is not None:  # the rule's runs, a fixed warm-up
            length += f", {args.warmup} warm-up"
        print(setup, length, sep="; ")
        print()
        print(throughput.text())
        print()
        print(difference.text())
        print()
        print(divergence_text("simulator", points, args.rho_t, args.mode))
        print(divergence_text("coarse models", points, args.rho_t, args.mode))
        print(finding(points))
        notes = precision_notes([p.result for p in points], "sim hybrid")
        if notes:
            print("\n" + notes)
        out.write_csv(THROUGHPUT_CSV, throughput)
        out.write_csv(DIFFERENCE_CSV, difference)
        plot_throughput(points, out.path(THROUGHPUT_PNG), setup, overwrite=out.force)
        plot_difference(
            points,
            out.path(DIFFERENCE_PNG),
            f"FCFS vs PS: {setup}",
            args.rho_t,
            overwrite=out.force,
        )
        print(out.summary())

    return run_scenario(NAME, body, args)


if __name__ == "__main__":
    sys.exit(main())
