"""Benchmark of running independent simulations on several processes (a script; pytest does not
collect it): wall seconds with one process and with every usable core, and the speed-up.

Three workloads, the README's own examples:

- ``sweep``: a sweep's points (``simulate resnet50-b32 --workers 1-16 --bandwidth 10Gbps
  --mode sync --sharing fcfs``), each sized by the stopping rule;
- ``seeds``: one Async-SGD configuration's 5 replications (``simulate resnet50-b32 --workers 8
  --network veth-1gbit``: the shipped profile's flow weights, duplex and transfer CPU cost);
- ``scaling``: ``scenarios/scaling.py``'s 30 points.

Each workload runs through the CLI in this process with ``--jobs 1`` and ``--jobs N``; the
printed tables must be identical (the script says so, and stops if they are not).

Usage::

    python tests/bench_parallel.py            # all three
    python tests/bench_parallel.py --only seeds
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import time
from pathlib import Path

from simcore.cli.main import main as sgdsim
from simcore.parallel import usable_cores

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scenarios"))

WORKLOADS = {
    "sweep": [
        "simulate", "resnet50-b32", "--workers", "1-16", "--bandwidth", "10Gbps",
        "--mode", "sync", "--sharing", "fcfs", "--quiet",
    ],
    "seeds": ["simulate", "resnet50-b32", "--workers", "8", "--network", "veth-1gbit", "--quiet"],
}  # fmt: skip


def _timed(run: list[str] | None, jobs: int, out_dir: Path) -> tuple[float, str]:
    """Wall seconds and the printed output (the lines that name times left out)."""
    text = io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(text):
        if run is None:
            import scaling  # scenarios/scaling.py

            code = scaling.main(["--out", str(out_dir), "--force", "--quiet", "--jobs", str(jobs)])
        else:
            code = sgdsim([*run, "--jobs", str(jobs)])
    wall = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"bench_parallel: the run failed (exit {code})")
    kept = [line for line in text.getvalue().splitlines() if not line.startswith("simulated ")]
    return wall, "\n".join(kept)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=[*WORKLOADS, "scaling"])
    args = parser.parse_args()
    cores = usable_cores()
    names = [args.only] if args.only else [*WORKLOADS, "scaling"]
    print(f"usable cores: {cores}")
    print(f"{'workload':<10} {'1 process':>10} {f'{cores} processes':>12} {'speed-up':>9}")
    for name in names:
        run = WORKLOADS.get(name)
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            one, text_one = _timed(run, 1, folder)
            many, text_many = _timed(run, cores, folder)
        if text_one != text_many:
            raise SystemExit(f"bench_parallel: {name}: the outputs differ between 1 and {cores}")
        print(f"{name:<10} {one:>9.1f}s {many:>11.1f}s {one / many:>8.2f}x")
    print("outputs identical with 1 and", cores, "processes")


if __name__ == "__main__":
    main()
