"""Which bucket cap, how many workers, ring or tree: PyTorch DDP for ResNet-50 at 10-100 Gbit/s?

Question
    ResNet-50 (batch 32 per worker) trains with PyTorch DDP on W workers with links of 10, 25
    or 100 Gbit/s. DDP all-reduces the gradients in buckets during the backward pass: which
    ``bucket_cap_mb``, how many workers, and NCCL's ring or its double binary tree?

Setup
    - the shipped ``resnet50-b32`` trace (97.5 MiB of gradients, profiled on a CPU), its
      computation sped up ``--speed`` (80) times to stand in for a V100;
    - DDP Sync-SGD with bucket caps ``--caps`` (1, 5, 25, 100 MiB; torch's rule in
      :mod:`simcore.sim.buckets`): 25 MiB is the default (first bucket 1 MiB), the others are
      given, so the first bucket's limit is the cap, as torch 2.x and ``sgdsim --bucket-cap``;
      W = ``--workers`` (1-32), ``--rates``, the ring and (W >= 2) the tree;
    - ``--latency`` per AllReduce hop (default 20 us, an Ethernet NCCL hop): 2(W-1) hops per
      bucket on the ring, 2 log2(W) on the tree; without it small buckets would be free;
    - runs until the 95% CI of examples/s is within ``--precision`` (``--steps`` fixes the
      length); beside each, the closed form :func:`simcore.analytic.ddp_model.predict_ddp`
      (the mean step: it misses the wait for the slowest of the W sampled steps).

Output
    A table per rate, the finding, and in ``--out`` (default ``results/ddp_buckets/``)
    ``ddp_buckets.csv`` (every point), ``ddp_buckets.png`` (examples/s against the cap and
    against W, a column per rate, ring solid, tree dashed) and ``ddp_buckets_timeline.png`` (a
    step of W = 8 at the slowest rate with 25 MiB and with 1 MiB buckets).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from simcore.analytic.ddp_model import ddp_worker_from_trace, predict_ddp
from simcore.cli.progress import Progress
from simcore.errors import ConfigError
from simcore.plots import new_figure, save_figure
from simcore.plots.timeline import draw_timeline
from simcore.report import (
    Column,
    ScenarioOutput,
    Table,
    base_config,
    estimate_cells,
    estimate_columns,
    finding_line,
    run_scenario,
    scenario_parser,
)
from simcore.report.scenario import length_setup, rate_list, simulate_points
from simcore.sim import SimulationConfig, SimulationResult, simulate
from simcore.sim.buckets import (
    DEFAULT_BUCKET_CAP_BYTES,
    DEFAULT_FIRST_BUCKET_BYTES,
    MIB,
    trace_buckets,
)
from simcore.trace.io import load_trace
from simcore.trace.model import Trace
from simcore.trace.transform import with_faster_computation
from simcore.units import format_bandwidth, parse_size

NAME = "ddp_buckets"
TRACE = "resnet50-b32"
CAPS = "1,5,25,100"  # MiB, as torch's bucket_cap_mb
WORKERS = (1, 2, 4, 8, 16, 32)
RATES = "10Gbit/s,25Gbit/s,100Gbit/s"
LATENCY = "20us"  # per AllReduce hop
SPEED = 80.0  # the CPU-profiled computation / SPEED is about a V100's
SEED = 1
TIMELINE_WORKERS = 8
TIMELINE_CAPS_MIB = (25, 1)
TIMELINE_SHOWN = 3  # workers drawn in the timeline
TIMELINE_STEP = 2  # the step drawn (after one warm-up step)
CSV_FILE = f"{NAME}.csv"
FIGURE_FILE = f"{NAME}.png"
TIMELINE_FILE = f"{NAME}_timeline.png"
COLLECTIVES = ("ring", "tree")

COLUMNS = (
    Column("rate_gbps", "Gbit/s", "{:g}"),
    Column("workers", "W"),
    Column("collective", "collective"),
    Column("cap_mib", "cap MiB", "{:g}"),
    Column("first_bucket_mib", "first MiB", "{:g}"),
    Column("buckets", "buckets"),
    *estimate_columns(),
    Column("efficiency_pct", "of W x one worker %", "{:.1f}"),
    Column("closed_form", "closed form"),
    Column("steps", "steps"),
)


def ddp_config(
    base: SimulationConfig, rate_bps: float, workers: int, collective: str, cap: int, **more: Any
) -> SimulationConfig:
    """``base`` at one point; the first bucket as :func:`simcore.cli.ddp_options.ddp_fields`
    sets it: 1 MiB with the default cap, else the cap."""
    first = DEFAULT_FIRST_BUCKET_BYTES if cap == DEFAULT_BUCKET_CAP_BYTES else cap
    point: dict[str, Any] = {
        "bandwidth_bps": rate_bps,
        "workers": workers,
        "collective": collective,
    }
    point |= {"bucket_cap_bytes": cap, "first_bucket_bytes": first, **more}
    return dataclasses.replace(base, **point)


def cap_list(text: str) -> tuple[int, ...]:
    """``--caps 1,5,25MiB``: sorted distinct bucket caps in bytes (a plain number is MiB)."""
    try:
        caps = {parse_size(p, name="--caps", default_unit="MiB") for p in text.split(",")}
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from err
    if min(caps) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: bucket caps must be at least 1 byte")
    return tuple(sorted(caps))


def sweep(args: argparse.Namespace, base: SimulationConfig) -> list[SimulationConfig]:
    """Every (rate, W, collective, cap) the sweep simulates; no tree with one worker."""
    return [
        ddp_config(base, rate, w, collective, cap)
        for rate in args.rates
        for w in args.workers
        for collective in COLLECTIVES
        if collective == "ring" or w >= 2
        for cap in args.caps
    ]


def closed_form(trace: Trace, c: SimulationConfig) -> float:
    """:func:`predict_ddp`'s examples/s for ``c`` (the trace's mean durations)."""
    worker = ddp_worker_from_trace(
        trace, bucket_cap_bytes=c.bucket_cap_bytes, first_bucket_bytes=c.first_bucket_bytes
    )
    one = predict_ddp(
        [worker], [c.workers], c.bandwidth_bps, latency_s=c.latency_s, collective=c.collective
    )
    return one.examples_per_s


@dataclass(frozen=True)
class Point:
    """One simulated setting: its config, its examples/s, W = 1's at the same rate and cap, and
    the closed form's examples/s."""

    result: SimulationResult
    solo_examples_per_s: float
    closed_form: float
    buckets: int

    @property
    def config(self) -> SimulationConfig:
        return self.result.config

    @property
    def key(self) -> tuple[float, int, float]:
        """(Gbit/s, W, cap MiB)."""
        c = self.config
        return (c.bandwidth_bps / 1e9, c.workers, c.bucket_cap_bytes / MIB)

    @property
    def value(self) -> float:
        return self.result.examples_per_s.value

    @property
    def efficiency_pct(self) -> float:
        """Examples/s as a share of W times one worker's."""
        return 100 * self.value / (self.config.workers * self.solo_examples_per_s)


def run(args: argparse.Namespace) -> tuple[list[Point], Trace, SimulationConfig]:
    """Simulate the sweep; returns its points, the sped-up trace and the base config."""
    trace = with_faster_computation(load_trace(args.trace), args.speed)
    base, _ = base_config(args, arch="ddp", mode="sync")
    configs = sweep(args, base)
    progress = Progress("simulating", "worker-steps", enabled=not args.quiet)
    results = simulate_points(trace, configs, args, progress)
    solo = {
        (r.config.bandwidth_bps, r.config.bucket_cap_bytes): r.examples_per_s.value
        for r in results
        if r.config.workers == 1
    }
    return (
        [
            Point(
                r,
                solo[r.config.bandwidth_bps, r.config.bucket_cap_bytes],
                closed_form(trace, r.config),
                len(trace_buckets(trace, r.config.bucket_cap_bytes, r.config.first_bucket_bytes)),
            )
            for r in results
        ],
        trace,
        base,
    )


def table(points: Sequence[Point]) -> Table:
    """Every point, one row each (the CSV)."""
    out = Table("", COLUMNS)
    for p in points:
        c = p.config
        out.add(
            rate_gbps=p.key[0],
            workers=c.workers,
            collective=c.collective,
            cap_mib=p.key[2],
            first_bucket_mib=c.first_bucket_bytes / MIB,
            buckets=p.buckets,
            **estimate_cells(p.result.examples_per_s),
            efficiency_pct=p.efficiency_pct,
            closed_form=p.closed_form,
            steps=c.steps,
        )
    return out


def pivot(points: Sequence[Point], rate_gbps: float) -> Table:
    """One rate's examples/s: a row per (W, collective), a column per cap, the best cap (none
    where every cap gives the same, as with W = 1)."""
    caps = sorted({p.key[2] for p in points})
    columns = [Column("workers", "W"), Column("collective", "collective")]
    columns += [Column(f"cap_{c:g}", f"{c:g} MiB") for c in caps]
    columns += [Column("best", "best MiB", "{:g}")]
    out = Table(f"{rate_gbps:g} Gbit/s: examples/s by bucket cap", columns)
    mine = [p for p in points if p.key[0] == rate_gbps]
    for w, collective in dict.fromkeys((p.config.workers, p.config.collective) for p in mine):
        by_cap = {
            p.key[2]: p.value
            for p in mine
            if (p.config.workers, p.config.collective) == (w, collective)
        }
        best = max(by_cap, key=by_cap.__getitem__)
        same = max(by_cap.values()) == min(by_cap.values())
        cells = {f"cap_{c:g}": by_cap[c] for c in caps}
        out.add(workers=w, collective=collective, best=None if same else best, **cells)
    return out


def finding(points: Sequence[Point]) -> str:
    """The best (cap, collective) at the largest W for each rate, and where the tree wins."""
    top = max(p.config.workers for p in points)
    parts = []
    for rate in sorted({p.key[0] for p in points}):
        best = max((p for p in points if p.key[:2] == (rate, top)), key=lambda p: p.value)
        parts.append(
            f"{best.key[2]:g} MiB {best.config.collective} at {rate:g} Gbit/s "
            f"({best.value:.0f} examples/s, {best.efficiency_pct:.0f}% of linear)"
        )
    ring = {p.key: p.value for p in points if p.config.collective == "ring"}
    trees = [p for p in points if p.config.collective == "tree"]
    wins = [p for p in trees if p.value > ring[p.key]]
    where = ""
    if wins:
        gain = max(100 * (p.value / ring[p.key] - 1) for p in wins)
        rates = "/".join(f"{r:g}" for r in sorted({p.key[0] for p in wins}))
        ws = ", ".join(str(w) for w in sorted({p.config.workers for p in wins}))
        where = f" (at {rates} Gbit/s, W = {ws}, by at most {gain:.2g}%)"
    return (
        f"With W = {top} the best setting is {', '.join(parts)}, and the tree beats the ring in "
        f"{len(wins)} of {len(trees)} multi-worker points{where}."
    )


def plot(points: Sequence[Point], out: ScenarioOutput, title: str) -> None:
    """Top row: examples/s against the cap, per W; bottom: against W, per cap; a column per
    rate; ring solid, tree dashed."""
    rates = sorted({p.key[0] for p in points})
    caps = sorted({p.key[2] for p in points})
    workers = sorted({p.config.workers for p in points})
    fig, axes = new_figure(2, len(rates), size=(4.0 * len(rates) + 1.6, 7.0), squeeze=False)
    for i, rate in enumerate(rates):
        top, bottom = axes[0, i], axes[1, i]
        for collective, style in (("ring", "-o"), ("tree", "--s")):
            mine = [p for p in points if p.key[0] == rate and p.config.collective == collective]
            for j, w in enumerate(workers[1:]):
                line = [p for p in mine if p.config.workers == w]
                xs, ys = [p.key[2] for p in line], [p.value for p in line]
                top.plot(xs, ys, style, ms=3, color=f"C{j}", label=f"W = {w}, {collective}")
            for j, cap in enumerate(caps):
                line = [p for p in mine if p.key[2] == cap]
                xs, ys = [p.config.workers for p in line], [p.value for p in line]
                bottom.plot(xs, ys, style, ms=3, color=f"C{j}", label=f"{cap:g} MiB, {collective}")
        solo = next(p.solo_examples_per_s for p in points if p.key[0] == rate)
        linear = [w * solo for w in workers]
        bottom.plot(workers, linear, ":", color="0.5", label="linear from W = 1")
        top.set_xscale("log")
        top.set_xticks(caps, [f"{c:g}" for c in caps])
        top.minorticks_off()
        top.set_title(f"{rate:g} Gbit/s", fontsize=10)
        top.set_xlabel("bucket cap (MiB)")
        bottom.set_xlabel("workers W")
        for ax in (top, bottom):
            ax.set_ylabel("throughput (examples/s)")
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
    for ax in axes[:, -1]:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save_figure(fig, out.path(FIGURE_FILE), overwrite=out.force)


def plot_timeline(trace: Trace, base: SimulationConfig, rate: float, out: ScenarioOutput) -> None:
    """Step TIMELINE_STEP of W = 8 on the ring (its first workers drawn), with each cap of
    TIMELINE_CAPS_MIB, on one time axis."""
    runs = []
    for cap_mib in TIMELINE_CAPS_MIB:
        steps = {"steps": TIMELINE_STEP + 1, "warmup_steps": 1, "timeline": True}
        config = ddp_config(base, rate, TIMELINE_WORKERS, "ring", cap_mib * MIB, **steps)
        timeline = simulate(trace, config).timeline
        assert timeline is not None
        step = next(s for s in timeline.steps if (s.step, s.worker) == (TIMELINE_STEP, 0))
        runs.append((config, timeline, step))
    width_s = max(step.end_s - step.start_s for _, _, step in runs) * 1.02
    fig, axes = new_figure(len(runs), 1, size=(11.0, 1.0 + 2.3 * len(runs)), squeeze=False)
    for i, (ax, (config, timeline, step)) in enumerate(zip(axes[:, 0], runs, strict=True)):
        view = draw_timeline(
            ax,
            timeline,
            workers=range(TIMELINE_SHOWN),
            steps=(TIMELINE_STEP, TIMELINE_STEP),
            trace=trace,
            arch="ddp",
            origin_s=step.start_s,
            xlim_s=width_s,
            legend=i == 0,
            step_labels=False,
        )
        n = len(trace_buckets(trace, config.bucket_cap_bytes, config.first_bucket_bytes))
        ax.set_title(
            f"cap {config.bucket_cap_bytes / MIB:g} MiB (first bucket "
            f"{config.first_bucket_bytes / MIB:g} MiB, {n} buckets): step {TIMELINE_STEP} takes "
            f"{(step.end_s - step.start_s) * 1e3:.0f} ms",
            fontsize=9,
            loc="left",
        )
        ax.set_xlabel(f"time since the step began ({view.unit})" if i == len(runs) - 1 else "")
    fig.suptitle(
        f"{trace.metadata.model_name}, DDP, W = {TIMELINE_WORKERS} (workers 0-"
        f"{TIMELINE_SHOWN - 1} drawn), {format_bandwidth(rate)}, ring, "
        f"{base.latency_s * 1e6:g} us/hop (predicted)",
        fontsize=10,
    )
    fig.tight_layout()
    save_figure(fig, out.path(TIMELINE_FILE), overwrite=out.force)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = scenario_parser(
        NAME,
        __doc__,
        trace=TRACE,
        workers=WORKERS,
        seed=SEED,
        bandwidth="10Gbps",
        precision=True,
        help_texts={"bandwidth": "one link rate instead of --rates, e.g. 10Gbps"},
    )
    parser.set_defaults(latency=LATENCY)
    parser.add_argument(
        "--rates", type=rate_list, default=rate_list(RATES), help=f"link rates (default {RATES})"
    )
    parser.add_argument(
        "--caps", type=cap_list, default=cap_list(CAPS), help=f"bucket caps, MiB (default {CAPS})"
    )
    parser.add_argument(
        "--speed",
        type=float,
        default=SPEED,
        help=f"computation speed-up over the trace (default {SPEED:g})",
    )
    args = parser.parse_args(argv)
    if 1 not in args.workers:
        parser.error("--workers: must include 1, the computation alone the others are compared to")
    if args.bandwidth is not None:
        args.rates = rate_list(args.bandwidth)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> None:
        out = ScenarioOutput(args.out, [CSV_FILE, FIGURE_FILE, TIMELINE_FILE], force=args.force)
        points, trace, base = run(args)
        setup = (
            f"{trace.metadata.model_name}, batch {trace.metadata.batch_size}/worker, "
            f"{trace.param_nbytes / MIB:.1f} MiB of gradients, computation / {args.speed:g}; "
            f"DDP, {base.latency_s * 1e6:g} us per AllReduce hop; {length_setup(args)}"
        )
        print(setup)
        for rate in sorted({p.key[0] for p in points}):
            print("\n" + pivot(points, rate).text())
        print("\n" + finding_line(finding(points)))
        out.write_csv(CSV_FILE, table(points))
        plot(points, out, f"{setup.split(';')[0]}, {base.latency_s * 1e6:g} us/hop (predicted)")
        plot_timeline(trace, base, min(args.rates), out)
        print("\n" + out.summary())

    return run_scenario(NAME, body, args)


if __name__ == "__main__":
    sys.exit(main())
