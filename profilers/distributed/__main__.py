"""``python -m profilers.distributed``: one real distributed training run, timestamps to JSON.

On one machine (every rank spawned here, loopback)::

    python -m profilers.distributed --model mlp --arch ps-sync --workers 2 -o run.json

One rank per machine, as torchrun starts it (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT`` from the environment; ranks ``0 .. servers-1`` are the servers)::

    torchrun --nnodes 3 --nproc-per-node 1 --node-rank R --master-addr HOST --master-port 29500 \\
        -m profilers.distributed --from-env --model mlp --workers 2 -o "run-rank-{rank}.json"

On an emulated cluster of network namespaces with the server's link shaped (root)::

    python -m profilers.distributed --model cnn --arch ps-sync --workers 3 --testbed 100Mbit/s

With ``--from-env`` each rank writes only its own records (its clock's timestamps; clocks of
different hosts are not comparable); :func:`profilers.distributed.combine` joins rank outputs in
Python. ``--trace-out`` (one worker, PS) also writes the run as an sgdsim trace.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from profilers.distributed.config import Architecture, CommHook, Overlap, RunConfig
from profilers.distributed.export import save_run_chrome
from profilers.distributed.launch import combine, run_rank_from_env
from profilers.distributed.records import RunResult, save_run_json
from profilers.distributed.spawn import run_distributed
from profilers.distributed.testbed import Testbed
from profilers.distributed.to_trace import run_to_trace
from simcore.errors import ConfigError, SgdsimError
from simcore.sim.buckets import parse_bucket_size
from simcore.sim.occupancy import occupancy_text
from simcore.trace.io import save_trace
from simcore.units import format_bytes, parse_bandwidth


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m profilers.distributed",
        description="Real data-parallel training with per-layer timestamps (gloo).",
    )
    parser.add_argument("--model", default="mlp", help="built-in or package.module:factory")
    parser.add_argument("--arch", choices=[a.value for a in Architecture], default="ps-async")
    parser.add_argument("--overlap", choices=[o.value for o in Overlap], default="layerwise")
    parser.add_argument("--workers", type=int, default=1, help="worker processes W")
    parser.add_argument(
        "--servers", type=int, help="parameter servers (default 1; allreduce and ddp 0)"
    )
    ddp = parser.add_argument_group("DDP (--arch ddp)")
    ddp.add_argument(
        "--bucket-cap",
        metavar="SIZE",
        help="DDP's bucket_cap_mb as a size, e.g. 25MiB (default: torch's, 25 MiB)",
    )
    ddp.add_argument(
        "--first-bucket",
        metavar="SIZE",
        help="the first bucket's limit (default: torch's, 1 MiB, or --bucket-cap if given)",
    )
    ddp.add_argument(
        "--comm-hook",
        choices=[h.value for h in CommHook],
        default="allreduce",
        help="allreduce (torch's default) or fp16 (fp16_compress_hook)",
    )
    ddp.add_argument("--gradient-as-bucket-view", action="store_true")
    parser.add_argument("--batch-size", type=int, default=32, help="examples per worker-step")
    parser.add_argument("--steps", type=int, default=20, help="steps per worker")
    parser.add_argument("--warmup", type=int, default=5, help="steps left out of summaries")
    parser.add_argument(
        "--threads",
        type=int,
        help="torch threads per rank (default: the cores shared out among the ranks here)",
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds (default 60)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--from-env", action="store_true", help="run the rank torchrun describes")
    parser.add_argument(
        "--testbed",
        metavar="RATE",
        help="run each rank in a network namespace of its own, the servers' links (allreduce: "
        "every worker's) shaped to RATE, e.g. 100Mbit/s; servers pinned to core 0 (needs root)",
    )
    parser.add_argument(
        "--worker-rate", metavar="RATE", help="with --testbed: also shape each worker's link"
    )
    parser.add_argument("-o", "--out", help="write the run's timestamps (JSON) here")
    parser.add_argument("--trace-out", help="with one PS worker: write an sgdsim trace here")
    parser.add_argument("--chrome-out", help="write the measured timeline (Perfetto) here")
    parser.add_argument("--force", action="store_true", help="overwrite existing files")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        arch = Architecture(args.arch)
        servers = args.servers if args.servers is not None else int(arch.uses_servers)
        config = RunConfig(
            args.model,
            architecture=arch,
            overlap=Overlap(args.overlap),
            workers=args.workers,
            servers=servers,
            batch_size=args.batch_size,
            steps=args.steps,
            warmup=args.warmup,
            seed=args.seed,
            timeout_s=args.timeout,
            threads=args.threads,
            device=args.device,
            bucket_cap_mb=_mib(args.bucket_cap, "--bucket-cap"),
            first_bucket_mb=_mib(args.first_bucket, "--first-bucket"),
            comm_hook=CommHook(args.comm_hook),
            gradient_as_bucket_view=args.gradient_as_bucket_view,
        )
        if args.worker_rate and not args.testbed:
            raise ConfigError("--worker-rate: needs --testbed (the emulated cluster)")
        if args.from_env:
            output = run_rank_from_env(config)
            result = combine(config, [output])
            # one file per rank: "{rank}" in the paths becomes this rank's number
            args.out = args.out and args.out.replace("{rank}", str(output.rank))
        elif args.testbed:
            rate = parse_bandwidth(args.testbed, name="--testbed")
            worker_rate = args.worker_rate and parse_bandwidth(
                args.worker_rate, name="--worker-rate"
            )
            result = Testbed(rate, worker_rate_bps=worker_rate or None).run(config)
            print_run_summary(result)
        else:
            result = run_distributed(config)
            print_run_summary(result)
        if args.out:
            save_run_json(result, args.out, overwrite=args.force)
        if args.chrome_out:
            save_run_chrome(result, args.chrome_out, overwrite=args.force)
        if args.trace_out:
            save_trace(run_to_trace(result), args.trace_out, overwrite=args.force)
    except SgdsimError as err:
        print(f"profilers.distributed: error: {err}", file=sys.stderr)
        return 2
    return 0


def _mib(text: str | None, option: str) -> float | None:
    """A size option in MiB, as DDP's bucket_cap_mb counts (None: not given)."""
    return None if text is None else parse_bucket_size(text, option) / 2**20


def print_run_summary(result: RunResult) -> None:
    """The run's throughput and, with several workers on parameter servers, how their transfers
    lined up on the servers' links (convoys or pipelining)."""
    config = result.config
    print(f"{result.examples_per_s:.2f} examples/s over {config.workers} worker(s)")
    if result.buckets:
        sizes = ", ".join(format_bytes(b.nbytes) for b in result.buckets)
        print(f"DDP buckets after torch rebuilt them: {len(result.buckets)} ({sizes})")
    occupancy = result.link_occupancy()
    if occupancy is not None and config.workers > 1:
        # Async servers time each worker's update, which ends its push; a Sync-SGD server
        # updates once per step, so there a push ends when gloo handed its bytes to the socket.
        until = (
            "the server began to apply it"
            if config.architecture is Architecture.PS_ASYNC
            else "its bytes were handed to the socket"
        )
        text = occupancy_text(occupancy)
        print(f"the servers' links after warm-up: {text} (a push until {until})")


if __name__ == "__main__":
    sys.exit(main())
