"""Regenerate the shipped sample traces: ``python -m profilers.samples [--force]``.

Profiles each (model, batch size) in :data:`SAMPLES` with the same settings as
``sgdsim profile --steps 20 --warmup 5`` and writes ``<model>-b<batch>.json`` into
``simcore/data/traces`` (or ``--out``). Run it on a quiet machine: other load inflates the timings.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from profilers.layer_profiler import profile_model
from simcore.errors import SgdsimError
from simcore.files import refuse_existing
from simcore.report.progress import Progress
from simcore.trace.io import save_trace

SAMPLES: tuple[tuple[str, int], ...] = (
    ("mlp", 64),
    ("cnn", 8),
    ("cnn", 32),
    ("cnn", 64),
    ("cnn", 128),
    ("resnet18", 32),
    ("resnet50", 32),
)
STEPS = 20
WARMUP = 5
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "simcore" / "data" / "traces"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m profilers.samples", description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--only", help="comma-separated sample names, e.g. cnn-b32")
    parser.add_argument("--force", action="store_true", help="replace existing samples")
    args = parser.parse_args(argv)
    wanted = [(m, b) for m, b in SAMPLES if not args.only or f"{m}-b{b}" in args.only.split(",")]
    try:
        for model, batch in wanted:
            name = f"{model}-b{batch}"
            target = refuse_existing(args.out / f"{name}.json", args.force)
            trace = profile_model(
                model,
                batch_size=batch,
                steps=STEPS,
                warmup=WARMUP,
                progress=Progress(name, "steps"),
            )
            path = save_trace(trace, target, overwrite=args.force)
            print(f"{path}: {path.stat().st_size / 1024:.0f} KiB")
    except SgdsimError as err:
        print(f"samples: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
