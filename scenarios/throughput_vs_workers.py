"""How far does data-parallel training scale on one parameter server, and where does it saturate?

Question
    ResNet-50 at batch 32 per worker trains against one parameter server whose NIC is a
    1 Gbit/s link. How many workers are worth renting: where does throughput stop growing, and
    does Sync- vs Async-SGD or the way the server's link is shared (FCFS vs processor sharing)
    change the answer?

Setup
    - trace: the shipped ``resnet50-b32`` sample, profiled on one worker with ``sgdsim profile``;
    - network: the shipped ``veth-1gbit`` profile (a tc-shaped 1 Gbit/s veth pair, measured with
      gloo; its fitted bandwidth and per-transfer latency are used);
    - W = 1..16 workers, one parameter server; each simulation runs ``STEPS`` steps per worker,
      the first ``WARMUP_STEPS`` left out, throughput with a 95% batch-means confidence interval.

Output
    A table per policy, the saturation point (the fewest workers that reach 95% of the best
    throughput), the best configuration, and the figure ``throughput_vs_workers.png`` in the
    output folder (default ``results/``).

Run ``python scenarios/throughput_vs_workers.py --help`` for the knobs (another trace or network,
fewer workers, a quick run).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from simcore.cli.progress import Progress
from simcore.errors import SgdsimError
from simcore.files import refuse_existing
from simcore.network_io import load_network_profile
from simcore.plots import Curve, plot_throughput_curves
from simcore.sim import SimulationConfig, SimulationResult, simulate
from simcore.trace.io import load_trace
from simcore.units import format_bandwidth

TRACE = "resnet50-b32"
NETWORK = "veth-1gbit"
WORKERS = (1, 2, 3, 4, 6, 8, 10, 12, 14, 16)
STEPS = 120
WARMUP_STEPS = 20
SEED = 1
SATURATION_SHARE = 0.95  # "saturated": within 5% of the best throughput seen
FIGURE = "throughput_vs_workers.png"

# (label, mode, link sharing): the policies compared.
POLICIES = (
    ("Async-SGD, processor sharing", "async", "ps"),
    ("Sync-SGD, processor sharing", "sync", "ps"),
    ("Sync-SGD, FCFS", "sync", "fcfs"),
)


@dataclass(frozen=True)
class PolicyCurve:
    label: str
    points: tuple[SimulationResult, ...]

    @property
    def workers(self) -> list[int]:
        return [p.config.workers for p in self.points]

    @property
    def examples_per_s(self) -> list[float]:
        return [p.examples_per_s.value for p in self.points]


def saturation_workers(curve: PolicyCurve, share: float = SATURATION_SHARE) -> int | None:
    """The fewest workers whose throughput reaches ``share`` of the curve's best, or None when
    only the largest W tried does (the curve is still climbing: no saturation in range)."""
    best = max(curve.examples_per_s)
    pairs = list(zip(curve.workers, curve.examples_per_s, strict=True))
    first = next(w for w, x in pairs if x >= share * best)
    return None if first == pairs[-1][0] and len(pairs) > 1 else first


def saturation_text(curve: PolicyCurve) -> str:
    w = saturation_workers(curve)
    if w is None:
        return f"still growing at W = {curve.workers[-1]}: no saturation in range"
    return f"saturates at W = {w} ({SATURATION_SHARE:.0%} of its best)"


def run(args: argparse.Namespace) -> tuple[list[PolicyCurve], str]:
    """Simulate every policy at every worker count; returns the curves and the model's label."""
    trace = load_trace(args.trace)
    network = load_network_profile(args.network)
    base = SimulationConfig(
        bandwidth_bps=network.bandwidth_bps,
        latency_s=network.latency_s,
        steps=args.steps,
        warmup_steps=args.warmup,
        seed=args.seed,
    )
    print(
        f"{trace.metadata.model_name}, batch {trace.metadata.batch_size}/worker, "
        f"{trace.param_nbytes / 2**20:.1f} MiB of parameters; one PS, "
        f"{format_bandwidth(network.bandwidth_bps)} + {network.latency_s * 1e6:.0f} us per "
        f"transfer ({args.network}); {args.steps} steps/worker, {args.warmup} warm-up"
    )
    progress = Progress("simulating", enabled=not args.quiet)
    total, done = len(POLICIES) * len(args.workers), 0
    curves = []
    for label, mode, sharing in POLICIES:
        points = []
        for w in args.workers:
            config = replace(base, workers=w, mode=mode, sharing=sharing)
            points.append(simulate(trace, config))
            done += 1
            progress(done, total)
        curves.append(PolicyCurve(label, tuple(points)))
    return curves, f"{trace.metadata.model_name} (batch {trace.metadata.batch_size}/worker)"


def report(curves: Sequence[PolicyCurve]) -> str:
    lines = []
    for curve in curves:
        lines.append(f"\n{curve.label}")
        lines.append(f"  {'W':>3} {'examples/s':>11} {'95% CI':>19} {'per worker':>11}")
        for p in curve.points:
            est = p.examples_per_s
            ci = f"{est.ci_low:.2f} .. {est.ci_high:.2f}" if est.ci_low is not None else "-"
            lines.append(
                f"  {p.config.workers:>3} {est.value:>11.2f} {ci:>19} "
                f"{est.value / p.config.workers:>11.2f}"
            )
        lines.append(f"  {saturation_text(curve)}")
    best_curve, best = max(
        ((c, p) for c in curves for p in c.points), key=lambda cp: cp[1].examples_per_s.value
    )
    lines.append(
        f"\nbest: {best_curve.label} with W = {best.config.workers}: "
        f"{best.examples_per_s.value:.2f} examples/s; {saturation_text(best_curve)}"
    )
    return "\n".join(lines)


def plot(curves: Sequence[PolicyCurve], args: argparse.Namespace, title: str) -> Path:
    single = curves[0].points[0]
    lines = [
        Curve(
            c.label,
            c.workers,
            c.examples_per_s,
            [p.examples_per_s.ci_low or p.examples_per_s.value for p in c.points],
            [p.examples_per_s.ci_high or p.examples_per_s.value for p in c.points],
        )
        for c in curves
    ]
    if single.config.workers == 1:
        ideal = [single.examples_per_s.value * w for w in curves[0].workers]
        lines.append(Curve("linear scaling from W = 1", curves[0].workers, ideal, style=":"))
    first = curves[0]
    w_sat = saturation_workers(first)
    marker = {}
    if w_sat is not None:
        at = first.examples_per_s[first.workers.index(w_sat)]
        marker[f"{first.label.split(',')[0]} saturates: W = {w_sat}"] = (w_sat, at)
    return plot_throughput_curves(
        lines, Path(args.out) / FIGURE, title=title, markers=marker, overwrite=args.force
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", default=TRACE, help=f"trace file or sample (default {TRACE})")
    parser.add_argument("--network", default=NETWORK, help=f"network profile (default {NETWORK})")
    parser.add_argument("--workers", type=_worker_list, default=WORKERS, help="e.g. 1,2,4,8")
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--warmup", type=int, default=WARMUP_STEPS)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--out", default="results", help="folder for the figure")
    parser.add_argument("--force", action="store_true", help="overwrite an existing figure")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return parser.parse_args(argv)


def _worker_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected positive integers like 1,2,4,8")
    return tuple(sorted(set(values)))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    figure = Path(args.out) / FIGURE
    try:
        refuse_existing(figure, args.force)  # fail before minutes of simulation, not after
        curves, model = run(args)
        print(report(curves))
        title = f"{model}, one parameter server, {args.network} network (predicted)"
        print(f"\nfigure: {plot(curves, args, title)}")
    except SgdsimError as err:
        print(f"throughput_vs_workers: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
