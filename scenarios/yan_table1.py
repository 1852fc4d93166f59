"""Which of the eight 20-machine configurations of Yan et al.'s Table 1 trains fastest?

Question
    Yan et al. (KDD'15, section 6.2.2, Table 1) rank eight configurations of 20 machines -
    workers per model replica (W), model replicas (R) and parameter servers (PS) - for an MNIST
    and an ImageNet-22K network trained on Adam, and report that their model's ranking matched
    the measured one. Does our implementation of their model (sections 4 and 5) rank the
    configurations the same way?

Setup
    - networks: the built-in ``mnist()`` and ``imagenet22k()`` layer descriptions (per-layer
      sizes are our assumptions; see :mod:`simcore.analytic.yan.networks`);
    - hardware: the paper's cluster as we read it (section 6.1: 16-core Xeon E5-2450 servers,
      268.8 GFLOP/s, one 10 Gbit/s NIC, 16 training threads). The per-operation costs are
      assumed, not measured on that cluster (the constants below); ``--measure`` uses this
      machine's instead (``profilers.hw_constants``);
    - a replica reads the weights every 70 samples (section 6.2); the read time sits halfway
      between its bounds (Eq. 10, 11);
    - for each configuration the optimizer (greedy mapping + DP, section 5.3) picks the
      per-layer partitions, threads and layer replicas; the configurations are ranked by the
      epoch time it finds.

What we can compare with
    Our copy of the paper lost the body of Table 1. The text still states: the best MNIST
    configuration is <2 W, 9 R, 2 PS>, and it beats <1 W, 18 R, 2 PS>; with 12 or more
    one-worker replicas, trading replicas for parameter servers slows MNIST down; the best
    ImageNet-22K configuration is <4 W, 4 R, 4 PS>. The eight configurations below are our
    reconstruction of the table's rows from those statements (all use 20 machines, W <= 4 as
    the paper's footnote 7 requires); only the statements above are checked, and the printed
    summary says which hold.

Output
    Per network the ranking beside the paper's (``?`` where its text gives no rank), which of the
    paper's statements hold, a one-sentence finding, and in ``--out`` (default
    ``results/yan_table1/``): ``yan_table1.csv`` (the rankings, one row per network and
    configuration) and ``yan_table1.png`` (epoch time per configuration, the paper's best marked).

Run ``python scenarios/yan_table1.py --help`` for the knobs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from simcore.analytic.yan import (
    HardwareConstants,
    Network,
    SearchResult,
    SearchSpace,
    imagenet22k,
    mnist,
    polynomial_search,
)
from simcore.cli.main import OneLineErrorParser
from simcore.plots.bars import BarGroup, plot_ranked_bars
from simcore.report import Column, ScenarioOutput, Table, run_scenario
from simcore.report.scenario import add_output_options

NAME = "yan_table1"
CSV_FILE = f"{NAME}.csv"
FIGURE_FILE = f"{NAME}.png"
MACHINES = 20
THREADS_PER_MACHINE = 16
# The paper's cluster, section 6.1. Peak 268.8 GFLOP/s over 16 cores is 8.4 G multiply-adds/s
# per core (1.2e-10 s each); we assume a third of peak is reached.
MULADD_S = 3.6e-10
ACT_S = 5e-9  # a sigmoid, about ten cycles at 2.1 GHz (assumed)
ERR_S = 5e-9  # an error term delta * f'(a) (assumed)
INTERFERENCE_PER_EXTRA_THREAD = 0.02  # C_interf(H) = 1 + 0.02 (H - 1) (assumed, mild)
LATENCY_S = 50e-6
BANDWIDTH_BPS = 10e9
READ_EVERY_SAMPLES = 70
READ_BOUND = 0.5  # M_w halfway between M_w^min and M_w^max
THREAD_CHOICES = (1, 2, 4, 8, 16)

# (workers per replica, model replicas, parameter servers); our reconstruction of Table 1.
CONFIGURATIONS = (
    (2, 9, 2),
    (1, 18, 2),
    (1, 16, 4),
    (1, 12, 8),
    (2, 8, 4),
    (2, 6, 8),
    (4, 4, 4),
    (4, 3, 8),
)
# The paper's best configuration per network (section 6.2.2), as (W, R, PS).
PAPER_BEST = {"mnist": (2, 9, 2), "imagenet22k": (4, 4, 4)}


@dataclass(frozen=True)
class Ranked:
    """One configuration's best plan and epoch time, and its rank among the eight."""

    wrp: tuple[int, int, int]
    result: SearchResult
    rank: int


def paper_hardware() -> HardwareConstants:
    interference = tuple(
        1.0 + INTERFERENCE_PER_EXTRA_THREAD * h for h in range(THREADS_PER_MACHINE)
    )
    return HardwareConstants(MULADD_S, ACT_S, ERR_S, interference, LATENCY_S, BANDWIDTH_BPS)


def label(wrp: tuple[int, int, int]) -> str:
    return f"<{wrp[0]} W, {wrp[1]} R, {wrp[2]} PS>"


def rank(
    network: Network,
    hw: HardwareConstants,
    threads: tuple[int, ...],
    read_bound: float = READ_BOUND,
) -> list[Ranked]:
    """Optimize each configuration's per-layer plan; sort the eight by epoch time."""
    results = []
    for w, r, ps in CONFIGURATIONS:
        space = SearchSpace(
            machines=MACHINES,
            threads=threads,
            resources=((ps, r, w),),
            read_every_samples=READ_EVERY_SAMPLES,
            read_bound=read_bound,
        )
        results.append(((w, r, ps), polynomial_search(network, hw, space)))
    results.sort(key=lambda item: item[1].epoch_s)
    return [Ranked(wrp, result, i + 1) for i, (wrp, result) in enumerate(results)]


def plan_text(result: SearchResult) -> str:
    """Per-layer partitions/threads/replicas, e.g. '2/16/1 2/16/1 1/16/2'."""
    return " ".join(f"{p.partitions}/{p.threads}/{p.replicas}" for p in result.config.plans)


COLUMNS = (
    Column("rank", "ours"),
    Column("paper_rank", "paper"),
    Column("configuration", "configuration"),
    Column("workers_per_replica", "W"),
    Column("replicas", "R"),
    Column("servers", "PS"),
    Column("epoch_min", "epoch min"),
    Column("read_share", "PS reads", "{:.0%}"),
    Column("plan", "per-layer P/H/R"),
)


def table(network: Network, ranked: Sequence[Ranked]) -> Table:
    """The ranking of one network, as printed and saved (its title names the network)."""
    tab = Table(network.name, COLUMNS)
    best = PAPER_BEST[network.name]
    for item in ranked:
        epoch = item.result.epoch
        w, r, ps = item.wrp
        tab.add(
            rank=item.rank,
            paper_rank="1" if item.wrp == best else "?",
            configuration=label(item.wrp),
            workers_per_replica=w,
            replicas=r,
            servers=ps,
            epoch_min=epoch.epoch_s / 60,
            read_share=epoch.read_s / epoch.epoch_s,
            plan=plan_text(item.result),
        )
    return tab


def report(network: Network, ranked: Sequence[Ranked]) -> str:
    lines = [
        f"\n{network.name}: {len(network.layers)} layers, "
        f"{sum(x.connections for x in network.layers) / 1e6:,.1f} M connections, "
        f"{network.samples_per_epoch:,} samples per epoch",
        table(network, ranked).text().split("\n", 1)[1],  # the title is in the line above
    ]
    lines.extend(f"  {text}" for text in checks(network.name, ranked))
    return "\n".join(lines)


def finding(rankings: dict[str, list[Ranked]]) -> str:
    """One sentence: where the paper's best configuration lands in our ranking per network, and
    how many of the paper's statements hold."""
    places = []
    for name, ranked in rankings.items():
        order = {item.wrp: item.rank for item in ranked}
        place = f"our #{order[PAPER_BEST[name]]} of {len(ranked)} for {name}"
        if ranked[0].wrp != PAPER_BEST[name]:
            place += f" (our #1: {label(ranked[0].wrp)})"
        places.append(place)
    results = [text.startswith("[holds]") for n, r in rankings.items() for text in checks(n, r)]
    return (
        f"finding: the paper's best configuration is {' and '.join(places)}; {sum(results)} of "
        f"{len(results)} of the paper's statements hold."
    )


def plot(
    networks: dict[str, Network], rankings: dict[str, list[Ranked]], out: ScenarioOutput
) -> None:
    groups = [
        BarGroup(
            f"{name} ({networks[name].samples_per_epoch:,} samples/epoch)",
            [label(item.wrp) for item in ranked],
            [item.result.epoch_s / 60 for item in ranked],
            marked=frozenset({label(PAPER_BEST[name])}),
            marked_legend="the paper's best",
        )
        for name, ranked in rankings.items()
    ]
    plot_ranked_bars(
        groups,
        out.path(FIGURE_FILE),
        xlabel="epoch time by Yan et al.'s model (min)",
        title=f"Yan et al. Table 1: {MACHINES} machines as <W, R, PS>, best first",
        overwrite=out.force,
    )


def checks(name: str, ranked: Sequence[Ranked]) -> list[str]:
    """The paper's statements about Table 1, each marked as holding or not in our ranking."""
    order = {item.wrp: item.rank for item in ranked}
    claims = [(f"paper's best {label(PAPER_BEST[name])} is our #1", order[PAPER_BEST[name]] == 1)]
    if name == "mnist":
        claims.append(
            ("<2 W, 9 R, 2 PS> beats <1 W, 18 R, 2 PS>", order[(2, 9, 2)] < order[(1, 18, 2)])
        )
        one_worker = [order[(1, 18, 2)], order[(1, 16, 4)], order[(1, 12, 8)]]
        claims.append(
            (
                "one-worker replicas slow down as PS replace replicas (18/2, 16/4, 12/8)",
                one_worker == sorted(one_worker),
            )
        )
    return [f"[{'holds' if ok else 'FAILS'}] {text}" for text, ok in claims]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = OneLineErrorParser(
        prog=f"python scenarios/{NAME}.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--network", choices=("mnist", "imagenet22k", "both"), default="both")
    parser.add_argument(
        "--threads", type=_int_list, default=THREAD_CHOICES, help="H choices, e.g. 1,16"
    )
    parser.add_argument(
        "--read-bound",
        type=_unit_interval,
        default=READ_BOUND,
        help="where M_w sits between its bounds: 0 best case (Eq. 11), 1 worst (Eq. 10)",
    )
    parser.add_argument(
        "--measure", action="store_true", help="use this machine's measured C_muladd etc."
    )
    add_output_options(parser, NAME)
    return parser.parse_args(argv)


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(sorted({int(v) for v in text.split(",")}))
    except ValueError:
        values = ()
    if not values or min(values) < 1 or max(values) > THREADS_PER_MACHINE:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected thread counts in 1..{THREADS_PER_MACHINE} like 1,4,16"
        )
    return values


def _unit_interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number in [0, 1]")
    return value


def hardware(measure: bool) -> HardwareConstants:
    if not measure:
        return paper_hardware()
    from profilers.hw_constants import measure_hardware_constants

    return measure_hardware_constants(
        max_threads=THREADS_PER_MACHINE, latency_s=LATENCY_S, bandwidth_bps=BANDWIDTH_BPS
    )


DISCUSSION = """
Discussion (of the default run; the numbers depend on assumed constants)
  - ImageNet-22K: our #1 is the paper's, <4 W, 4 R, 4 PS>: the 22,000-way output layer makes
    weight reads heavy, and four workers per replica read from min(N_ps, N_wr) = 4 servers at
    once (Eq. 11). Under the worst-case reads alone (--read-bound 1) <4 W, 3 R, 8 PS> wins.
  - MNIST: we rank <4 W, 4 R, 4 PS> first, not the paper's <2 W, 9 R, 2 PS>. Our C_muladd is
    one constant, so cutting a layer in four is as efficient as cutting it in two; the paper
    measured sub-linear MNIST speedup from 2 to 4 workers (its Fig. 8), a cache and message
    effect that one constant cannot show. We do reproduce the paper's explanation of why
    <2 W, 9 R, 2 PS> beats <1 W, 18 R, 2 PS>: a one-worker replica reads from one server.
  - Trading one-worker replicas for servers (18/2 -> 16/4 -> 12/8) speeds MNIST up in our model
    unless reads are near their best case (--read-bound 0): Eq. 10 charges every read with
    N_mr, and T_epoch counts N_sample / N_read reads whatever the number of replicas, so fewer
    replicas shorten the reads more than they lengthen the computation.
  - Adam's measurements cannot be rerun, and the per-layer sizes, the per-operation costs and
    where M_w lies between its bounds are our assumptions; the rows other than the paper's
    stated best are our reconstruction, so '?' marks ranks the paper's text does not give."""


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> None:
        out = ScenarioOutput(args.out, [CSV_FILE, FIGURE_FILE], force=args.force)
        hw = hardware(args.measure)
        names = ("mnist", "imagenet22k") if args.network == "both" else (args.network,)
        print(
            f"{MACHINES} machines; C_muladd {hw.muladd_s:.2e} s, C_act {hw.act_s:.2e} s, "
            f"C_err {hw.err_s:.2e} s, C_interf(16) {hw.interf(16):.2f}, "
            f"{hw.bandwidth_bps / 1e9:g} Gbit/s + {hw.latency_s * 1e6:.0f} us; reads every "
            f"{READ_EVERY_SAMPLES} samples, M_w at {args.read_bound:g} between its bounds; "
            f"H in {args.threads}"
        )
        networks = {name: mnist() if name == "mnist" else imagenet22k() for name in names}
        rankings = {
            name: rank(network, hw, args.threads, args.read_bound)
            for name, network in networks.items()
        }
        for name, ranked in rankings.items():
            print(report(networks[name], ranked))
        print(DISCUSSION)
        out.write_csv(CSV_FILE, [table(networks[n], r) for n, r in rankings.items()])
        plot(networks, rankings, out)
        print("\n" + finding(rankings))
        print(out.summary())

    return run_scenario(NAME, body, args)


if __name__ == "__main__":
    sys.exit(main())
