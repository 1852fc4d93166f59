"""The options of PyTorch DDP (``--arch ddp``), shared by ``simulate``, ``timeline``, ``analyze``
and ``advise``: bucket limits, the collective, the comm hook and the bucket copies.

They default to None so that one given with another architecture is refused (it would do
nothing there); :func:`ddp_fields` turns them into :class:`~simcore.sim.SimulationConfig`
fields. Sizes take units; a plain number is MiB, as torch's ``bucket_cap_mb`` counts.
"""

from __future__ import annotations

import argparse
from typing import Any

from simcore.cli.guards import refuse_given
from simcore.errors import ConfigError
from simcore.sim.buckets import (
    DEFAULT_BUCKET_CAP_BYTES,
    DEFAULT_FIRST_BUCKET_BYTES,
    parse_bucket_size,
    trace_buckets,
)
from simcore.sim.collectives import collective_names
from simcore.sim.config import SimulationConfig
from simcore.trace.model import Trace
from simcore.units import format_bytes, parse_time_per_size

__all__ = [
    "DDP_DESTS",
    "add_ddp_options",
    "bucket_cap_note",
    "ddp_fields",
    "ddp_text",
    "hook_names",
]

DDP_DESTS = (
    "bucket_cap",
    "first_bucket",
    "collective",
    "comm_hook",
    "bucket_copy",
    "gradient_as_bucket_view",
)
HOOKS = {"allreduce": "none", "fp16": "fp16"}  # --comm-hook -> SimulationConfig.ddp_compression
MAX_COPY_S_PER_BYTE = 1e-3  # 1 ms per byte: far slower than any memory a device copies in


def hook_names() -> tuple[str, ...]:
    return tuple(HOOKS)


def add_ddp_options(
    p: argparse.ArgumentParser, *, collective: bool = True, title: str = "PyTorch DDP (--arch ddp)"
) -> None:
    """The DDP options; ``collective=False`` where every collective is tried (advise)."""
    group = p.add_argument_group(title)
    group.add_argument(
        "--bucket-cap",
        metavar="SIZE",
        help="DDP's bucket_cap_mb: gradients are all-reduced in buckets of at least this many "
        "bytes (a plain number is MiB, as torch counts; default 25MiB)",
    )
    group.add_argument(
        "--first-bucket",
        metavar="SIZE",
        help="the first bucket's limit (default: 1MiB with the default --bucket-cap, else "
        "--bucket-cap's, as torch 2.x's DDP does with an explicit bucket_cap_mb)",
    )
    if collective:
        group.add_argument(
            "--collective",
            choices=collective_names(),
            help="the AllReduce algorithm: ring, or NCCL's double binary tree (default ring)",
        )
    group.add_argument(
        "--comm-hook",
        choices=hook_names(),
        help="DDP's comm hook: allreduce (the default) or fp16 (fp16_compress_hook: half the "
        "bytes, a cast before and after)",
    )
    group.add_argument(
        "--bucket-copy",
        metavar="TIME/SIZE",
        help="what the device takes to copy a gradient into its bucket and back (and to cast "
        "a bucket for fp16), e.g. 0.1ns/B (default 0: free)",
    )
    group.add_argument(
        "--gradient-as-bucket-view",
        action="store_true",
        default=None,
        help="DDP's gradient_as_bucket_view: the gradients live in the buckets, no copies",
    )


def ddp_fields(
    args: argparse.Namespace, used: bool | None = None, needs: str = ""
) -> dict[str, Any]:
    """The config fields the DDP options set; none where DDP is not simulated (one given is
    refused). ``used``: whether DDP is (default: ``--arch ddp``); ``needs``: what would make it
    so, for the refusal."""
    if used is None:
        used = args.arch == "ddp"
        needs = f"--arch ddp (not --arch {args.arch})"
    if not used:
        refuse_given(args, DDP_DESTS, f"only with {needs}")
        return {}
    cap = _size(args.bucket_cap, "--bucket-cap", DEFAULT_BUCKET_CAP_BYTES)
    # As torch 2.x's DDP: the 1 MiB first bucket comes with the default cap only; an explicit
    # bucket_cap_mb is the first bucket's limit too.
    first_default = DEFAULT_FIRST_BUCKET_BYTES if args.bucket_cap is None else cap
    fields: dict[str, Any] = {
        "bucket_cap_bytes": cap,
        "first_bucket_bytes": _size(args.first_bucket, "--first-bucket", first_default),
        "collective": getattr(args, "collective", None) or "ring",
        "ddp_compression": HOOKS[args.comm_hook or "allreduce"],
        "gradient_as_bucket_view": bool(args.gradient_as_bucket_view),
    }
    if args.bucket_copy is not None:
        seconds, bare = parse_time_per_size(args.bucket_copy, name="--bucket-copy")
        if bare and seconds > 0:
            raise ConfigError(
                f"--bucket-copy: {args.bucket_copy!r} needs its unit, e.g. 0.1ns/B or 1ms/MB"
            )
        if seconds > MAX_COPY_S_PER_BYTE:
            raise ConfigError(
                f"--bucket-copy: {args.bucket_copy!r} is {seconds:g} s per byte; a device "
                "copies memory in well under 1ms/B (e.g. 0.1ns/B)"
            )
        fields["bucket_copy_s_per_byte"] = seconds
    return fields


def ddp_text(config: SimulationConfig, trace: Trace) -> str:
    """``3 buckets of 1.01, 25.3, 14.2 MiB (cap 25 MiB, first 1 MiB), ring``: DDP's setup."""
    buckets = trace_buckets(trace, config.bucket_cap_bytes, config.first_bucket_bytes)
    sizes = ", ".join(format_bytes(b.nbytes) for b in buckets[:6])
    more = f", ... ({len(buckets) - 6} more)" if len(buckets) > 6 else ""
    extras = []
    if config.ddp_compression == "fp16":
        extras.append("fp16 comm hook (half the bytes)")
    if config.bucket_copy_s_per_byte > 0 and not config.gradient_as_bucket_view:
        extras.append(f"bucket copies {config.bucket_copy_s_per_byte * 1e9:.3g} ns/B")
    if config.gradient_as_bucket_view:
        extras.append("gradient_as_bucket_view")
    return (
        f"{len(buckets)} bucket{'s' if len(buckets) != 1 else ''} of {sizes}{more} (cap "
        f"{format_bytes(config.bucket_cap_bytes)}, first {format_bytes(config.first_bucket_bytes)}"
        f"), {config.collective} AllReduce" + "".join(f", {e}" for e in extras)
    )


def _size(text: str | None, option: str, default: int) -> int:
    return default if text is None else parse_bucket_size(text, option)


def bucket_cap_note(args: argparse.Namespace, fields: dict[str, Any], traces: list[Trace]) -> str:
    """A note when the first bucket holds every gradient (its limit is at least the model):
    one bucket, whose AllReduce waits for the whole backward pass ("" otherwise)."""
    if not fields or not traces:
        return ""
    model = max(t.param_nbytes for t in traces)
    first = fields["first_bucket_bytes"]
    if model <= 0 or first < model:
        return ""
    if args.first_bucket is not None:
        limit = f"--first-bucket {format_bytes(first)}"
    elif args.bucket_cap is not None:
        limit = f"--bucket-cap {format_bytes(first)} (the first bucket's limit too)"
    else:
        limit = f"DDP's first bucket of {format_bytes(first)}"
    return (
        f"{limit} is at least the model's {format_bytes(model)} "
        "of gradients: one bucket, whose AllReduce cannot start before the whole backward "
        "pass ends (smaller buckets, --first-bucket and --bucket-cap below the model, let "
        "the AllReduces overlap it)"
    )
