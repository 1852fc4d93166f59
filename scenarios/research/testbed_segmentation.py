"""What does the emulated testbed's shaping cost the ranks' CPU, and when?

Question
    The testbed (``profilers.netns_cluster``) shapes each node's link with ``tc tbf`` and a bucket
    of 1 ms at the link's rate. Linux hands a qdisc TCP sends of up to 64 KiB as one GSO packet;
    when the bucket is smaller than one (``profilers.netns.tbf_segments_gso``: below ~545 Mbit/s
    with 1 ms), tbf splits it into wire-size packets in software, and every packet is then sent
    and received one by one. How much CPU does that cost a ring AllReduce's ranks, and how much
    of the ring's rate, against the same link with a bucket that passes the packets whole (as a
    real NIC's segmentation offload does)?

Setup
    - gloo ring all-reduces of four float32 buffers of 4 MiB, then the same 16 MiB as one
      (``profilers.distributed.ring_goodput``), among W ranks of the emulated cluster, every
      node's link shaped to each ``--rates`` value (default 300 and 500 Mbit/s, the validation
      campaigns' range), with the testbed's bucket and with one of two GSO packets;
    - ``--repeats`` timed repetitions after two warm-up ones; medians.
    Needs root (network namespaces), as ``sgdsim validate --testbed`` does; ~1 minute.

Output
    Per rate, bucket and W: whether the bucket splits GSO packets, the ring's goodput
    (``2(W-1)/W * 8 * bytes / time``) and its fraction of the link, and a rank's CPU per byte it
    sends or receives (the single all-reduce's CPU time over its bytes) and its cores while the
    ring runs; in ``--out`` (default ``results/testbed_segmentation/``):
    ``testbed_segmentation.csv`` and ``testbed_segmentation.png``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Sequence
from typing import NamedTuple

from profilers.distributed.ring_goodput import RingGoodput, measure_ring_goodput
from profilers.netns import (
    check_permitted,
    tbf_burst_nbytes,
    tbf_segments_gso,
    tbf_whole_packets_burst_s,
)
from profilers.netns_cluster import BURST_S
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
from simcore.units import format_bandwidth

NAME = "testbed_segmentation"
CSV_FILE = f"{NAME}.csv"
FIGURE_FILE = f"{NAME}.png"
LAYER_NBYTES = (4 << 20,) * 4  # large layers: the CPU per byte shows, not the messages'


class RingRow(NamedTuple):
    """One ring timed with one bucket."""

    rate_bps: float
    burst_s: float
    ring: RingGoodput

    @property
    def burst_nbytes(self) -> int:
        return tbf_burst_nbytes(self.rate_bps, self.burst_s)

    @property
    def splits(self) -> bool:
        return tbf_segments_gso(self.rate_bps, self.burst_s)

    @property
    def cpu_s_per_byte(self) -> float:
        """A rank's CPU per byte it sent or received, in the single all-reduce of all bytes."""
        return statistics.median(self.ring.flat_cpu_s) / self.ring.nbytes_moved

    @property
    def cores(self) -> float:
        """A rank's cores while the layers' all-reduces ran (CPU time over wall time)."""
        return statistics.median(self.ring.cpu_s) / statistics.median(self.ring.times_s)


def measure(
    rates: Sequence[float],
    workers: Sequence[int],
    repeats: int,
    say: Callable[[str], None] | None = None,
) -> list[RingRow]:
    """Every rate, with the testbed's bucket and with whole packets, every W."""
    rows = []
    for rate in rates:
        for burst in (BURST_S, tbf_whole_packets_burst_s(rate)):
            for w in workers:
                ring = measure_ring_goodput(
                    LAYER_NBYTES, workers=w, link_rate_bps=rate, repeats=repeats, burst_s=burst
                )
                row = RingRow(rate, burst, ring)
                rows.append(row)
                if say is not None:
                    say(
                        f"{format_bandwidth(rate)}, bucket {row.burst_nbytes} B, W={w}: "
                        f"{format_bandwidth(ring.goodput_bps())}, "
                        f"{row.cpu_s_per_byte * 1e9:.2f} ns/B"
                    )
    return rows


def table(rows: Sequence[RingRow]) -> Table:
    out = Table(
        "ring AllReduce of 16 MiB (4 x 4 MiB) per tbf bucket",
        [
            Column("link_mbps", "link Mbit/s", "{:g}"),
            Column("bucket_bytes", "bucket B"),
            Column("bucket_ms", "bucket ms", "{:.2f}"),
            Column("splits_gso", "splits GSO"),
            Column("workers", "W"),
            Column("goodput_mbps", "goodput Mbit/s", "{:.0f}"),
            Column("of_link", "of link", "{:.2f}"),
            Column("cpu_ns_per_byte", "rank CPU ns/B", "{:.2f}"),
            Column("rank_cores", "rank cores", "{:.2f}"),
        ],
    )
    for row in rows:
        goodput = row.ring.goodput_bps()
        out.add(
            link_mbps=row.rate_bps / 1e6,
            bucket_bytes=row.burst_nbytes,
            bucket_ms=row.burst_s * 1e3,
            splits_gso="yes" if row.splits else "no",
            workers=row.ring.workers,
            goodput_mbps=goodput / 1e6,
            of_link=goodput / row.rate_bps,
            cpu_ns_per_byte=row.cpu_s_per_byte * 1e9,
            rank_cores=row.cores,
        )
    return out


def plot(rows: Sequence[RingRow], out: ScenarioOutput) -> None:
    """CPU per byte and the ring's share of the link per (rate, W), both buckets side by side."""
    groups = sorted({(r.rate_bps, r.ring.workers) for r in rows})
    fig, (cpu_ax, rate_ax) = new_figure(1, 2, size=(9.0, 3.8))
    width = 0.38
    for k, splits in enumerate((True, False)):
        mine = {(r.rate_bps, r.ring.workers): r for r in rows if r.splits == splits}
        xs = [i + (k - 0.5) * width for i, g in enumerate(groups) if g in mine]
        picked = [mine[g] for g in groups if g in mine]
        label = "bucket splits GSO packets" if splits else "bucket holds them whole"
        cpu_ax.bar(xs, [r.cpu_s_per_byte * 1e9 for r in picked], width, label=label)
        rate_ax.bar(xs, [r.ring.goodput_bps() / r.rate_bps for r in picked], width, label=label)
    labels = [f"{rate / 1e6:g} Mbit/s\nW={w}" for rate, w in groups]
    for ax in (cpu_ax, rate_ax):
        ax.set_xticks(range(len(groups)), labels, fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    cpu_ax.set_ylabel("a rank's CPU, ns per byte sent or received")
    rate_ax.set_ylabel("ring goodput / link rate")
    rate_ax.set_ylim(0, 1.05)
    cpu_ax.legend(fontsize=8)
    fig.suptitle("The testbed's tbf bucket against one that passes GSO packets whole", fontsize=10)
    fig.tight_layout()
    save_figure(fig, out.path(FIGURE_FILE), overwrite=out.force)


def finding(rows: Sequence[RingRow]) -> str:
    """CPU per byte with and without splitting, and the ring that lost most of its rate."""
    split = [r for r in rows if r.splits]
    whole = {(r.rate_bps, r.ring.workers): r for r in rows if not r.splits}
    if not split:
        return finding_line(
            "at these rates the testbed's bucket holds a GSO packet whole, so its shaping costs "
            "the ranks no CPU beyond a real link's."
        )
    split_cpu = [r.cpu_s_per_byte * 1e9 for r in split]
    whole_cpu = [r.cpu_s_per_byte * 1e9 for r in whole.values()]
    worst = min(split, key=lambda r: r.ring.goodput_bps() / r.rate_bps)
    twin = whole[(worst.rate_bps, worst.ring.workers)]
    return finding_line(
        f"where the testbed's bucket splits GSO packets a ring's rank spends "
        f"{min(split_cpu):.1f}-{max(split_cpu):.1f} ns of CPU per byte against "
        f"{min(whole_cpu):.2f}-{max(whole_cpu):.2f} with the packets whole, and a ring of "
        f"{worst.ring.workers} at {format_bandwidth(worst.rate_bps)} moves "
        f"{worst.ring.goodput_bps() / worst.rate_bps:.2f} of the link's rate against "
        f"{twin.ring.goodput_bps() / twin.rate_bps:.2f}."
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = bare_scenario_parser(NAME, __doc__)
    parser.add_argument(
        "--rates",
        type=rate_list,
        default=rate_list("300Mbit/s,500Mbit/s"),
        help="link rates, comma-separated (default 300Mbit/s,500Mbit/s)",
    )
    parser.add_argument(
        "--workers", type=worker_list, default=(2, 4), help="ranks of the ring (default 2,4)"
    )
    parser.add_argument(
        "--repeats", type=positive_int, default=5, help="timed repetitions per ring (default 5)"
    )
    add_output_options(parser, NAME)
    args = parser.parse_args(argv)
    if min(args.workers) < 2:
        parser.error(f"--workers: a ring needs at least 2 ranks, got {min(args.workers)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> None:
        check_permitted(NAME)
        out = ScenarioOutput(args.out, [CSV_FILE, FIGURE_FILE], force=args.force)
        say = progress_printer(args)
        rows = measure(args.rates, args.workers, args.repeats, say)
        result = table(rows)
        print(result.text())
        out.write_csv(CSV_FILE, result)
        plot(rows, out)
        print("\n" + finding(rows))
        print(out.summary())

    return run_scenario(NAME, body, args)


if __name__ == "__main__":
    sys.exit(main())
