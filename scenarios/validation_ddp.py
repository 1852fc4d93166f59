"""Real PyTorch DDP runs for the DDP validation campaign (simcore/data/validation/ddp).

For every model and link rate: the link and the rings of 2..W measured on the emulated cluster,
three pairs of one-worker runs (the profile and the computation alone), then DDP at W = 1..4 with
each bucket cap, 3 runs a point taken in rounds. Nothing in the predictor is chosen on these
runs: assess them with

    sgdsim validate --from-runs simcore/data/validation/ddp

Needs root (network namespaces and tc) and an otherwise idle machine; about 8 minutes a model
and rate on 2 cores. A file already kept is not measured again, so an interrupted campaign
resumes where it stopped.

    python scenarios/validation_ddp.py [--out results/ddp] [--models cnn mlp transformer]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from profilers.distributed.measurements import Measurements, compacted, save_measurements
from profilers.distributed.validation import measure

# None: torch's default buckets (25 MiB, the first 1 MiB); 1.0: bucket_cap_mb=1 (the first too).
BUCKET_CAPS_MB: tuple[float | None, ...] = (None, 1.0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="results/ddp", help="folder of the runs (default results/ddp)")
    p.add_argument("--models", nargs="+", default=["cnn", "mlp", "transformer"])
    p.add_argument("--rates", nargs="+", type=float, default=[300.0, 500.0], help="Mbit/s")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--workers-max", type=int, default=4)
    p.add_argument("--repetitions", type=int, default=3)
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--warmup", type=int, default=4)
    args = p.parse_args(argv)
    out = Path(args.out)
    (out / "kept").mkdir(parents=True, exist_ok=True)
    for rate in args.rates:
        for model in args.models:
            name = f"{model}-b{args.batch_size}-{rate:g}-ddp"
            kept = out / "kept" / f"{name}.json.gz"
            if kept.exists():
                print(f"== {name}: kept already", flush=True)
                continue
            print(f"== {name}", flush=True)
            raw = out / f"{name}.json.gz"

            def keep(measured: Measurements, raw: Path = raw) -> None:
                save_measurements(measured, raw, overwrite=True)

            measured = measure(
                model,
                batch_size=args.batch_size,
                workers_max=args.workers_max,
                architectures=("ddp",),
                repetitions=args.repetitions,
                steps=args.steps,
                warmup=args.warmup,
                link_rate_bps=rate * 1e6,
                bucket_caps_mb=BUCKET_CAPS_MB,
                progress=lambda line: print(f"  {line}", flush=True),
                checkpoint=keep,
            )
            keep(measured)
            save_measurements(compacted(measured), kept)
    print("== done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
