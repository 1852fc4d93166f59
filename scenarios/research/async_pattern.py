"""Which pattern do identical Async-SGD workers settle in on a shaped link, and does it repeat?

Question
    The simulator's identical deterministic Async-SGD workers on a link of equal shares move in
    step (they pull together, compute together, push together). Real workers on the emulated
    testbed do not: at 200 Mbit/s two cnn workers ran half a step apart, one pulling while the
    other pushed, and reached 1.7x one worker's rate where the simulator gave 1.2x. Is that
    pattern the link's own, without any training, and is it the same each time?

Setup
    - the bare step of ``--trace`` (``profilers.distributed.async_probe.probe_step``: its
      layers' parameter bytes, each layer's forward and backward time as a sleep, or with
      ``--burn`` spent on the CPU by workers sharing the cores after the server's), per-layer
      overlap as the runner's workers do it (``--strict``: strict phases);
    - at each ``--rates`` value, a server rank on the emulated cluster behind a link shaped to
      that rate, serving W worker ranks that loop pull, sleep, push for about ``--seconds``
      after five warm-up steps (``measure_async_probe``), for every ``--workers`` W, the whole
      set ``--repeats`` times in turn;
    - the simulator on the same bare step: the link's bandwidth set so that one simulated worker
      runs as fast as the one-worker probes did (their median), equal shares and full duplex,
      five seeds (``--burn``: the workers' computation sharing the same cores).
    Needs root (network namespaces), as ``sgdsim validate --testbed`` does; with the defaults
    about five minutes.

Output
    Per rate, W and repeat: all workers' steps per second and the quartiles of the workers'
    phases (where each worker's steps start within worker 0's: 0 together, 0.5 half a step
    apart); per rate and W the repeats' median, range and spread against the simulator's
    rate; in ``--out`` (default ``results/async_pattern/``): ``async_pattern.csv``, every probe
    in ``async_pattern.json`` (``probe_to_dict``), and ``async_pattern.png``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
from collections.abc import Callable, Sequence
from typing import NamedTuple

from profilers.distributed.async_probe import (
    PROBE_S,
    AsyncProbe,
    ProbeStep,
    measure_async_probe,
    probe_step,
    probe_to_dict,
    probe_trace,
)
from profilers.distributed.config import Architecture
from profilers.distributed.testbed import Testbed, available_cores
from profilers.netns import check_permitted
from simcore.errors import ConfigError
from simcore.plots import new_figure, save_figure
from simcore.report import ScenarioOutput, finding_line, run_scenario
from simcore.report.scenario import (
    add_output_options,
    bare_scenario_parser,
    positive_int,
    progress_printer,
    rate_list,
    worker_list,
)
from simcore.report.table import Column, Table
from simcore.sim import SimulationConfig, simulate
from simcore.trace.io import load_trace
from simcore.units import format_bandwidth

NAME = "async_pattern"
CSV_FILE = f"{NAME}.csv"
JSON_FILE = f"{NAME}.json"
FIGURE_FILE = f"{NAME}.png"
DEFAULT_TRACE = "cnn-b32"
SIM_SEEDS = 5
SIM_STEPS = 300
SIM_WARMUP_STEPS = 30
_BISECTIONS = 40  # halvings of the bandwidth's bracket: far below a percent


class ProbeRow(NamedTuple):
    rate_bps: float
    repeat: int
    probe: AsyncProbe


class Simulated(NamedTuple):
    """The simulator's rate at one W: the mean of its seeds, their range, their patterns."""

    steps_per_s: float
    low: float
    high: float
    patterns: tuple[str, ...]


def measure(
    step: ProbeStep,
    *,
    layerwise: bool,
    rates: Sequence[float],
    workers: Sequence[int],
    repeats: int,
    probe_s: float,
    burn: bool = False,
    say: Callable[[str], None] | None = None,
) -> list[ProbeRow]:
    """Every rate, ``repeats`` times every W in turn (a drift of the machine touches every W)."""
    rows = []
    for rate in rates:
        for repeat in range(repeats):
            for w in workers:
                probe = measure_async_probe(
                    step.layer_nbytes,
                    step.forward_s,
                    step.backward_s,
                    layerwise=layerwise,
                    workers=w,
                    burn=burn,
                    link_rate_bps=rate,
                    probe_s=probe_s,
                )
                rows.append(ProbeRow(rate, repeat, probe))
                if say is not None:
                    say(
                        f"{format_bandwidth(rate)}, repeat {repeat + 1}, W={w}: "
                        f"{probe.steps_per_s():.3g} steps/s"
                    )
    return rows


def one_worker_bandwidth(step: ProbeStep, layerwise: bool, steps_per_s: float) -> float:
    """The link bandwidth at which one simulated worker runs ``steps_per_s`` (bisection in
    log space: one worker's rate rises with the bandwidth); ConfigError when the computation
    alone is slower."""
    trace = probe_trace(step, layerwise=layerwise)

    def rate(bandwidth: float) -> float:
        config = SimulationConfig(
            workers=1,
            bandwidth_bps=bandwidth,
            mode="async",
            overlap="layerwise" if layerwise else "none",
            steps=20,
            warmup_steps=2,
        )
        return simulate(trace, config).steps_per_s.value

    low, high = 1e3, 1e12
    if rate(high) < steps_per_s:
        raise ConfigError(
            f"one worker's probes ran {steps_per_s:.3g} steps/s, faster than the bare step's "
            f"computation alone allows: the trace is not the step that was probed"
        )
    for _ in range(_BISECTIONS):
        mid = math.sqrt(low * high)
        low, high = (mid, high) if rate(mid) < steps_per_s else (low, mid)
    return math.sqrt(low * high)


def simulated(
    step: ProbeStep,
    layerwise: bool,
    bandwidth: float,
    workers: int,
    *,
    worker_cores: float | None = None,
    seed: int = 1,
) -> Simulated:
    """The simulator's bare step with ``workers`` workers: equal shares, full duplex;
    ``worker_cores``: the workers' computation shares that many cores (processor sharing, one
    core a worker at most), as burning probes' does; None: every worker computes alone."""
    config = SimulationConfig(
        workers=workers,
        bandwidth_bps=bandwidth,
        mode="async",
        overlap="layerwise" if layerwise else "none",
        steps=SIM_STEPS,
        warmup_steps=SIM_WARMUP_STEPS,
        replications=SIM_SEEDS if workers > 1 else 1,
        seed=seed,
    )
    if worker_cores is not None:
        config = dataclasses.replace(
            config,
            colocated_workers=workers,
            host_cpu_cores=worker_cores,
            worker_cpu_cores=1.0,
            shared_nic=False,
        )
    result = simulate(probe_trace(step, layerwise=layerwise), config)
    per_seed = list(result.replication_steps_per_s) or [result.steps_per_s.value]
    return Simulated(
        result.steps_per_s.value,
        min(per_seed),
        max(per_seed),
        tuple(p.label for p in result.phases),
    )


def simulate_rates(
    step: ProbeStep,
    layerwise: bool,
    rows: Sequence[ProbeRow],
    worker_cores: float | None = None,
) -> dict[tuple[float, int], Simulated]:
    """Per rate with one-worker probes: the simulator at every W probed there
    (``worker_cores``: as :func:`simulated`)."""
    out: dict[tuple[float, int], Simulated] = {}
    for rate in sorted({r.rate_bps for r in rows}):
        ones = [r.probe.steps_per_s() for r in rows if r.rate_bps == rate and r.probe.workers == 1]
        if not ones:
            continue
        bandwidth = one_worker_bandwidth(step, layerwise, statistics.median(ones))
        for w in sorted({r.probe.workers for r in rows if r.rate_bps == rate}):
            out[(rate, w)] = simulated(step, layerwise, bandwidth, w, worker_cores=worker_cores)
    return out


def probes_table(rows: Sequence[ProbeRow]) -> Table:
    out = Table(
        "every probe",
        [
            Column("link_mbps", "link Mbit/s", "{:g}"),
            Column("workers", "W"),
            Column("repeat", "repeat"),
            Column("steps_per_s", "steps/s", "{:.3g}"),
            Column("phase_q1", "phase q1", "{:.2f}"),
            Column("phase_median", "phase median", "{:.2f}"),
            Column("phase_q3", "phase q3", "{:.2f}"),
        ],
    )
    for row in rows:
        q = row.probe.phase_quartiles() or (math.nan, math.nan, math.nan)
        out.add(
            link_mbps=row.rate_bps / 1e6,
            workers=row.probe.workers,
            repeat=row.repeat + 1,
            steps_per_s=row.probe.steps_per_s(),
            phase_q1=q[0],
            phase_median=q[1],
            phase_q3=q[2],
        )
    return out


def spread(values: Sequence[float]) -> float:
    """The range of ``values`` over their median."""
    return (max(values) - min(values)) / statistics.median(values)


def summary_table(rows: Sequence[ProbeRow], sim: dict[tuple[float, int], Simulated]) -> Table:
    out = Table(
        "per link rate and W: the repeats against the simulator",
        [
            Column("link_mbps", "link Mbit/s", "{:g}"),
            Column("workers", "W"),
            Column("median", "median steps/s", "{:.3g}"),
            Column("low", "lowest", "{:.3g}"),
            Column("high", "highest", "{:.3g}"),
            Column("spread_pct", "spread %", "{:.1f}"),
            Column("simulated", "simulated", "{:.3g}"),
            Column("simulated_error_pct", "sim err %", "{:+.1f}"),
            Column("simulated_patterns", "sim patterns"),
        ],
    )
    for rate, w in sorted({(r.rate_bps, r.probe.workers) for r in rows}):
        rates = [r.probe.steps_per_s() for r in rows if (r.rate_bps, r.probe.workers) == (rate, w)]
        median = statistics.median(rates)
        s = sim.get((rate, w))
        out.add(
            link_mbps=rate / 1e6,
            workers=w,
            median=median,
            low=min(rates),
            high=max(rates),
            spread_pct=100 * spread(rates),
            simulated=s.steps_per_s if s else math.nan,
            simulated_error_pct=100 * (s.steps_per_s / median - 1) if s else math.nan,
            simulated_patterns=_patterns_text(s.patterns) if s else "",
        )
    return out


def _patterns_text(patterns: Sequence[str]) -> str:
    counts = {p: patterns.count(p) for p in dict.fromkeys(patterns)}
    return ", ".join(f"{p} {n}" for p, n in counts.items())


def plot(
    rows: Sequence[ProbeRow], sim: dict[tuple[float, int], Simulated], out: ScenarioOutput
) -> None:
    """Per rate: every probe's rate against W, the simulator's, and W times one worker's."""
    rates = sorted({r.rate_bps for r in rows})
    fig, axes = new_figure(1, len(rates), size=(4.6 * len(rates), 3.8), squeeze=False)
    for ax, rate in zip(axes[0], rates, strict=True):
        mine = [r for r in rows if r.rate_bps == rate]
        ax.scatter(
            [r.probe.workers for r in mine],
            [r.probe.steps_per_s() for r in mine],
            s=18,
            color="black",
            zorder=3,
            label="probes (each repeat)",
        )
        ws = sorted({r.probe.workers for r in mine})
        ones = [r.probe.steps_per_s() for r in mine if r.probe.workers == 1]
        if ones:
            one = statistics.median(ones)
            ax.plot(ws, [w * one for w in ws], "--", color="grey", label="W x one worker")
        simulated_ws = [w for w in ws if (rate, w) in sim]
        if simulated_ws:
            points = [sim[(rate, w)] for w in simulated_ws]
            ax.plot(simulated_ws, [p.steps_per_s for p in points], "o-", label="simulator")
            ax.fill_between(
                simulated_ws, [p.low for p in points], [p.high for p in points], alpha=0.2
            )
        ax.set_title(format_bandwidth(rate), fontsize=10)
        ax.set_xlabel("workers W")
        ax.set_xticks(ws)
        # Up to a little above what was measured or simulated: W x one worker runs off the top.
        shown = [r.probe.steps_per_s() for r in mine] + [sim[(rate, w)].high for w in simulated_ws]
        ax.set_ylim(0, 1.3 * max(shown))
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("steps/s, all workers")
    axes[0][0].legend(fontsize=8)
    fig.suptitle("Async-SGD workers' bare steps on a shaped link", fontsize=10)
    fig.tight_layout()
    save_figure(fig, out.path(FIGURE_FILE), overwrite=out.force)


def finding(rows: Sequence[ProbeRow], sim: dict[tuple[float, int], Simulated]) -> str:
    """How far repeats of one W apart differ with one worker and with more, and the simulator's
    largest miss."""
    groups: dict[tuple[float, int], list[float]] = {}
    for r in rows:
        groups.setdefault((r.rate_bps, r.probe.workers), []).append(r.probe.steps_per_s())
    one = [spread(v) for (_, w), v in groups.items() if w == 1 and len(v) > 1]
    many = [spread(v) for (_, w), v in groups.items() if w > 1 and len(v) > 1]
    parts = []
    if many:
        parts.append(
            f"repeated probes of two workers or more differed by up to {100 * max(many):.0f}% "
            f"of their median"
        )
        if one:
            parts[-1] += f" (one worker: {100 * max(one):.0f}%)"
    misses = [
        (sim[key].steps_per_s / statistics.median(v) - 1, key)
        for key, v in groups.items()
        if key in sim and key[1] > 1
    ]
    if misses:
        error, (rate, w) = max(misses, key=lambda m: abs(m[0]))
        parts.append(
            f"the simulator with equal shares was {100 * error:+.0f}% off their median at W={w} "
            f"and {format_bandwidth(rate)}"
        )
    if not parts:
        return finding_line("one probe of each W: nothing to compare.")
    return finding_line("; ".join(parts) + ".")


def probes_json(trace_name: str, rows: Sequence[ProbeRow]) -> dict[str, object]:
    return {
        "trace": trace_name,
        "probes": [
            {"link_rate_bps": r.rate_bps, "repeat": r.repeat, "probe": probe_to_dict(r.probe)}
            for r in rows
        ],
    }


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be > 0 seconds, got {text}")
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = bare_scenario_parser(NAME, __doc__)
    parser.add_argument(
        "--trace",
        default=DEFAULT_TRACE,
        help=f"the step to probe: a sample trace's name or a trace file (default {DEFAULT_TRACE})",
    )
    parser.add_argument(
        "--rates",
        type=rate_list,
        default=rate_list("200Mbit/s,500Mbit/s"),
        help="the server's link rates, comma-separated (default 200Mbit/s,500Mbit/s)",
    )
    parser.add_argument("--workers", type=worker_list, default=(1, 2, 3, 4), help="W (default 1-4)")
    parser.add_argument(
        "--repeats", type=positive_int, default=3, help="probes of each W (default 3)"
    )
    parser.add_argument(
        "--seconds",
        type=positive_seconds,
        default=PROBE_S,
        help=f"each probe's length, about (default {PROBE_S:g})",
    )
    parser.add_argument(
        "--strict", action="store_true", help="strict phases instead of per-layer overlap"
    )
    parser.add_argument(
        "--burn",
        action="store_true",
        help="spend each layer's computation on the CPU instead of sleeping (the workers "
        "sharing the cores after the server's, as the validation's runs do)",
    )
    add_output_options(parser, NAME)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> None:
        step = probe_step(load_trace(args.trace))
        check_permitted(NAME)
        out = ScenarioOutput(args.out, [CSV_FILE, JSON_FILE, FIGURE_FILE], force=args.force)
        say = progress_printer(args)
        layerwise = not args.strict
        rows = measure(
            step,
            layerwise=layerwise,
            rates=args.rates,
            workers=args.workers,
            repeats=args.repeats,
            probe_s=args.seconds,
            burn=args.burn,
            say=say,
        )
        # Burning workers share the cores the testbed leaves them (all but the server's).
        testbed = Testbed(cores=available_cores())
        worker_cores = testbed.worker_cores(Architecture.PS_ASYNC) if args.burn else None
        sim = simulate_rates(step, layerwise, rows, worker_cores)
        tables = [probes_table(rows), summary_table(rows, sim)]
        print(
            f"bare step of {args.trace}: {sum(step.layer_nbytes) / 1e6:.2f} MB in "
            f"{len(step.layer_nbytes)} layer(s), {step.compute_s * 1e3:.1f} ms of computation"
        )
        for table in tables:
            print("\n" + table.text())
        out.write_csv(CSV_FILE, tables[1])
        out.write_json(JSON_FILE, probes_json(args.trace, rows))
        plot(rows, sim, out)
        print("\n" + finding(rows, sim))
        print(out.summary())

    return run_scenario(NAME, body, args)


if __name__ == "__main__":
    sys.exit(main())
