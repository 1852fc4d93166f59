"""``sgdsim advise``: which data-parallel configuration to run on a budget of N machines.

Ranks PS Async-SGD, PS Sync-SGD (1 or 2 parameter servers, each link sharing assumption), ring
AllReduce and PyTorch DDP (ring or tree) at every worker count that fits, by the analytic
models, then simulates the best few (:mod:`simcore.analytic.advisor`). Prints a ranked table
and each family's saturation point.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from typing import Any

from simcore.analytic.advisor import (
    DEFAULT_SEED,
    DEFAULT_SIM_STEPS,
    Advice,
    Ranked,
    advise,
)
from simcore.cli.ddp_options import add_ddp_options, ddp_fields
from simcore.cli.guards import check_range, check_rates, fill_defaults, refuse_given
from simcore.cli.host_options import check_intra_bandwidth_used
from simcore.cli.link_options import (
    DEFAULT_BANDWIDTH,
    NETWORK_HELP,
    add_effect_options,
    link_settings,
)
from simcore.cli.output_options import (
    EXIT_INTERRUPTED,
    add_output_options,
    advise_csv,
    architecture_text,
    interrupted_note,
    print_csv,
)
from simcore.cli.precision_options import (
    add_precision_options,
    precision_rule,
)
from simcore.cli.progress import Progress
from simcore.cli.seeds import (
    add_replications_options,
    advise_lockstep_note,
    advise_seeds_note,
)
from simcore.errors import ConfigError
from simcore.link_settings import LinkSettings, with_traces
from simcore.report.output import print_json
from simcore.saturation import SATURATION_SHARE
from simcore.sim.precision import stopping_text
from simcore.trace.io import load_trace
from simcore.trace.model import Trace
from simcore.units import format_bandwidth, format_bytes, format_number, parse_bandwidth

MAX_PRICE = 1e12  # per machine-hour


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "advise",
        help="rank data-parallel configurations for a machine budget",
        description="Rank PS Async-/Sync-SGD (1 or 2 servers, each link sharing assumption), "
        "ring AllReduce and PyTorch DDP (ring or tree) at every worker count within --machines, "
        "by the analytic models; simulate the best --confirm of them; print the ranking and "
        "saturation points.",
    )
    p.add_argument("trace", metavar="TRACE", help="trace file or sample name")
    p.add_argument("--machines", type=int, required=True, help="machine budget N (servers count)")
    p.add_argument(
        "--bandwidth", help=f"each machine's link (default: --network's, else {DEFAULT_BANDWIDTH})"
    )
    p.add_argument("--network", help=NETWORK_HELP)
    p.add_argument("--latency", help="per-transfer latency (simulations only; default --network's)")
    add_effect_options(p)
    p.add_argument("--price", type=float, help="price per machine-hour: adds cost per M examples")
    hosts = p.add_argument_group("hosts of several devices (TPDS'22 4.4)")
    hosts.add_argument(
        "--devices-per-host",
        default="1",
        help="host sizes to choose between, e.g. 1,4,8; --machines and --price then count "
        "devices (default 1)",
    )
    hosts.add_argument("--intra-bandwidth", help="link between a host's devices, e.g. 150GB/s")
    hosts.add_argument(
        "--flow-cap", help="per-flow cap of the network, e.g. 10Gbps (simulations only)"
    )
    p.add_argument("--top", type=int, default=10, help="rows to print (default 10)")
    p.add_argument("--confirm", type=int, default=3, help="candidates to simulate (default 3)")
    p.add_argument(
        "--steps",
        type=int,
        help="steps per worker per simulation (default: as many as --precision needs)",
    )
    add_precision_options(p)
    p.add_argument(
        "--seed", type=int, help=f"root seed of the simulations (default {DEFAULT_SEED})"
    )
    add_replications_options(p, phases=False)
    add_ddp_options(p, collective=False, title="the DDP candidates (ring and tree)")
    add_output_options(p)
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(handler=run)


# Options of the simulations that confirm the best candidates: with --confirm 0 none runs.
SIMULATION_OPTIONS = (
    "steps",
    "seed",
    "replications",
    "precision",
    "max_steps",
    "latency",
    "flow_cap",
)


def _check_simulation_options(args: argparse.Namespace) -> None:
    """ConfigError for a simulation's option given with --confirm 0 (nothing is simulated: it
    would do nothing, and the header would say it was used); gives --seed its default."""
    if args.confirm == 0:
        refuse_given(
            args,
            SIMULATION_OPTIONS,
            "only with --confirm above 0 (it sets the simulations that confirm the best "
            "candidates; --confirm 0 runs none)",
        )
    fill_defaults(args, {"seed": DEFAULT_SEED})


def run(args: argparse.Namespace) -> int:
    if args.top < 1:
        raise ConfigError(f"--top: must be an integer >= 1, got {args.top}")
    check_range("--price", args.price, 0, MAX_PRICE)
    _check_simulation_options(args)
    sizes = _sizes(args.devices_per_host)
    check_intra_bandwidth_used(args.intra_bandwidth, max(sizes))
    if args.machines >= 1 and min(sizes) > args.machines:
        raise ConfigError(
            f"--devices-per-host: no host of {args.devices_per_host} devices fits the budget of "
            f"--machines {args.machines} (which then counts devices)"
        )
    link = link_settings(args)
    bandwidth_bps, latency_s = link.bandwidth_bps.value, link.latency_s.value
    where = f" ({args.network})" if link.bandwidth_bps.source == args.network else ""
    trace = load_trace(args.trace)
    link = with_traces(link, [trace])
    quiet = args.quiet or args.json or args.csv
    progress = Progress("simulate", "worker-steps", enabled=not quiet)
    rule = precision_rule(args)
    advice = advise(
        trace,
        args.machines,
        bandwidth_bps,
        price_per_machine_hour=args.price,
        confirm_top=args.confirm,
        sim_steps=DEFAULT_SIM_STEPS if args.steps is None else args.steps,
        seed=args.seed,
        latency_s=latency_s,
        progress=progress,
        devices_per_host=sizes,
        intra_bandwidth_bps=_optional_bandwidth(args.intra_bandwidth, "--intra-bandwidth"),
        flow_cap_bps=_optional_bandwidth(args.flow_cap, "--flow-cap"),
        replications=args.replications,
        configure=lambda config: link.apply(config, strict=False),
        precision=rule,
        ddp={k: v for k, v in ddp_fields(args, used=True).items() if k != "collective"},
    )
    check_rates((r.candidate.label, r.examples_per_s) for r in advice.ranked[: args.top])
    if args.json:
        context = advice_to_dict(advice, trace, args, latency_s)
        context["link"] = advice_link_dict(link)
        points = context.pop("ranked")
        print_json(args, "advise", points, context=context, interrupted=advice.interrupted)
    elif args.csv:
        print_csv(*advise_csv(advice.ranked[: args.top], advice.price_per_machine_hour))
    else:
        print(format_advice(advice, trace, args, where))
        print("\n".join(advice_link_lines(link)))
    push_cv = link.flow_weight_cv_push
    uneven = bool(link.flow_weight_cv.value or (push_cv is not None and push_cv.value))
    for r in advice.ranked:
        note = "" if r.stopping is None else stopping_text(r.stopping, r.simulated_spread)
        for text in (note, advise_lockstep_note(r, args, uneven=uneven)):
            if text:
                print(f"note: {r.candidate.label}: {text}", file=sys.stderr if quiet else None)
    if advice.interrupted:
        confirming = min(args.confirm, len(advice.ranked))
        interrupted_note("advise", len(advice.simulated), confirming, "confirming simulations")
        return EXIT_INTERRUPTED
    return 0


def advice_link_lines(link: LinkSettings) -> list[str]:
    """Where the link came from, which effects the confirming simulations used and that the
    analytic ranking has none of them."""
    b = link.bandwidth_bps
    lines = [f"link: {format_bandwidth(b.value)} ({b.source})"]
    used = [link.effect_text(key) for key in link.effects_on()]
    if link.ring is not None and b.source == link.profile:
        used.append(f"ring AllReduce goodput per W ({link.profile}) for ring candidates")
    if used:
        lines.append(
            f"simulations use: {', '.join(used)} (flow weights on PS candidates with ps links "
            "only); the analytic ranking models none of these"
        )
    if link.note:
        lines.append(link.note)
    return lines


def advice_link_dict(link: LinkSettings) -> dict[str, Any]:
    """The JSON form of :func:`advice_link_lines`."""
    return {
        "bandwidth_bps": link.bandwidth_bps.to_dict(),
        "simulated_effects": {key: value.to_dict() for key, value in link.effects_on().items()},
        "host_cpu_cores": link.host_cpu_cores.to_dict(),
        "ring_goodput_used": link.ring is not None and link.bandwidth_bps.source == link.profile,
        "profile": link.profile,
        "note": link.note,
    }


def _sizes(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in text.split(","))
    except ValueError:
        raise ConfigError(
            f"--devices-per-host: expected integers like 1,4,8, got {text!r}"
        ) from None


def _optional_bandwidth(text: str | None, name: str) -> float | None:
    return None if text is None else parse_bandwidth(text, name=name)


def _row(rank: int, r: Ranked) -> dict[str, Any]:
    c, sim = r.candidate, r.simulated
    return {
        "rank": rank,
        "label": c.label,
        "arch": c.arch,
        "mode": c.mode,
        "sharing": c.sharing,
        "workers": c.workers,
        "servers": c.servers if c.arch == "ps" else 0,
        "devices_per_host": c.devices_per_host,
        "machines": c.machines,
        "analytic_examples_per_s": r.analytic_examples_per_s,
        "simulated_examples_per_s": None
        if sim is None
        else {
            "value": sim.value,
            "ci_low": sim.ci_low,
            "ci_high": sim.ci_high,
            "spread": None if r.simulated_spread is None else list(r.simulated_spread),
            "stopping": None if r.stopping is None else asdict(r.stopping),
        },
        "examples_per_s": r.examples_per_s,
        "source": r.source,
        "cost_per_million_examples": r.cost_per_million_examples,
    }


def advice_to_dict(
    advice: Advice, trace: Trace, args: argparse.Namespace, latency_s: float
) -> dict[str, Any]:
    """The JSON document: the top ``args.top`` rows, saturation points and the run's settings."""
    return {
        "trace": trace.source,
        "model": trace.metadata.model_name,
        "machines": advice.machines,
        "bandwidth_bps": advice.bandwidth_bps,
        "latency_s": latency_s,
        "price_per_machine_hour": advice.price_per_machine_hour,
        "sim_steps": args.steps,
        "seed": args.seed,
        "candidates": len(advice.ranked),
        "ranked": [_row(i + 1, r) for i, r in enumerate(advice.ranked[: args.top])],
        "saturation": [
            {"family": s.family, "workers": s.workers, "max_workers": s.max_workers}
            for s in advice.saturation
        ],
        "simulated": [c.label for c in advice.simulated],
    }


def _length(args: argparse.Namespace) -> str:
    """How long each confirming simulation ran: ``--steps``, or the stopping rule."""
    if args.steps is not None:
        return f"{args.steps} steps/worker"
    rule = precision_rule(args)
    assert rule is not None
    return (
        f"each until its 95% CI is within {100 * rule.target:g}%, at most {rule.max_steps} "
        "steps/worker; --json: its steps"
    )


def _sim_cell(r: Ranked) -> str:
    sim = r.simulated
    if sim is None:
        return "-"
    if sim.ci_low is None or sim.ci_high is None:
        return format_number(sim.value)
    return f"{format_number(sim.ci_low)} .. {format_number(sim.ci_high)}"


def advice_rows(shown: list[Ranked], priced: bool) -> list[list[str]]:
    """The ranked table's header and rows as text cells: the architecture, the link sharing
    assumption (ps, fcfs or hybrid; none for a ring) and whether the examples/s it is ranked by
    were simulated or only predicted analytically, each in a column of its own."""
    hosts = any(r.candidate.devices_per_host > 1 for r in shown)
    header = ["rank", "architecture", "servers", "sharing", *(["host of"] if hosts else [])]
    header += ["W", "machines", "examples/s", "by", "analytic", "simulated 95% CI"]
    header += ["seeds min .. max", *(["cost/M ex"] if priced else [])]
    rows = [header]
    for i, r in enumerate(shown):
        c = r.candidate
        spread = (
            "-"
            if r.simulated_spread is None
            else " .. ".join(format_number(v) for v in r.simulated_spread)
        )
        row = [str(i + 1), architecture_text(r), str(c.servers) if c.arch == "ps" else "-"]
        sharing = "-" if c.arch == "allreduce" else c.sharing  # DDP: its collective
        row += [sharing, *([str(c.devices_per_host)] if hosts else [])]
        row += [str(c.workers), str(c.machines), format_number(r.examples_per_s), r.source]
        row += [format_number(r.analytic_examples_per_s), _sim_cell(r), spread]
        if priced:
            cost = r.cost_per_million_examples
            row.append("-" if cost is None else format_number(cost))
        rows.append(row)
    return rows


LEFT_COLUMNS = ("architecture", "sharing", "by")  # words left-aligned, numbers right


def aligned(rows: list[list[str]]) -> list[str]:
    """``rows`` (header first) as aligned lines: words left, numbers right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    left = [name in LEFT_COLUMNS for name in rows[0]]
    return [
        "  ".join(
            cell.ljust(w) if is_left else cell.rjust(w)
            for cell, w, is_left in zip(row, widths, left, strict=True)
        ).rstrip()
        for row in rows
    ]


def format_advice(advice: Advice, trace: Trace, args: argparse.Namespace, where: str) -> str:
    """The ranked table and the saturation points, as text."""
    meta = trace.metadata
    priced = advice.price_per_machine_hour is not None
    model_nbytes = sum(layer.param_nbytes for layer in trace.layers)
    shown = list(advice.ranked[: args.top])
    lines = [
        f"{meta.model_name}, batch {meta.batch_size}/worker, {format_bytes(model_nbytes)} of "
        f"parameters; budget {advice.machines} machines, "
        f"{format_bandwidth(advice.bandwidth_bps)} each{where}",
        f"{len(advice.ranked)} configurations predicted by the analytic models; "
        + (
            f"the best {len(advice.simulated)} simulated ({_length(args)}, seed {args.seed}"
            f"{advise_seeds_note(args)})"
            if advice.simulated
            else "none simulated (--confirm 0)"
        ),
        "ranked: the simulated configurations first, by simulated examples/s; then the others "
        "by analytic examples/s (column 'by')",
        *aligned(advice_rows(shown, priced)),
    ]
    if priced:
        cheapest = advice.by_cost[0]
        cost = format_number(cheapest.cost_per_million_examples or 0.0)
        lines.append(
            f"cheapest: {cheapest.candidate.label}, {cost} per million examples ({cheapest.source})"
        )
    lines.append(f"saturation (analytic; fewest W reaching {SATURATION_SHARE:.0%} of the best):")
    family_width = max(len(s.family) for s in advice.saturation)
    for s in advice.saturation:
        if s.workers:
            text = f"W = {s.workers}"
        elif s.max_workers == 1:
            text = "only W = 1 fits the budget"
        else:
            text = f"still growing at W = {s.max_workers}"
        lines.append(f"  {s.family:<{family_width}}  {text}")
    return "\n".join(lines)
