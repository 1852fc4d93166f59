"""``sgdsim profile``: profile a real PyTorch model on this machine and write a trace.

torch is imported only when the command runs, so the rest of the CLI starts fast.
"""

from __future__ import annotations

import argparse
from typing import Any

from simcore.cli.guards import fill_defaults, refuse_given
from simcore.cli.output_options import add_output_options, trace_show_document
from simcore.cli.progress import Progress
from simcore.errors import ConfigError, ProfilingError, SgdsimError
from simcore.files import check_output
from simcore.report.output import print_json
from simcore.trace.io import save_trace
from simcore.trace.summary import summarize

MAX_PROFILE_STEPS = 10_000  # --steps and --warmup: more is hours of profiling and a huge trace
MAX_PROFILE_THREADS = 1024  # --threads: far beyond any host's cores (torch fails on absurd ones)
# The options of a profile, which --list-models does not use: None until given, so that one given
# beside it is refused (guards.refuse_given) rather than ignored; then these defaults.
PROFILE_DEFAULTS: dict[str, object] = {
    "batch_size": 32,
    "steps": 20,
    "warmup": 5,
    "device": "cpu",
    "seed": 0,
}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "profile",
        help="profile one worker's SGD step of a real PyTorch model into a trace",
        description="Time every layer's forward and backward pass (and the server-side update) of "
        "a real model over several steps and write the trace JSON that the simulator reads.",
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--model",
        help="built-in model name (see `sgdsim profile --list-models`) or package.module:factory, "
        "as `sgdsim validate --model` takes it",
    )
    which.add_argument(
        "--model-path", help="user model factory as package.module:function (--model takes it too)"
    )
    which.add_argument("--list-models", action="store_true", help="list built-in models and exit")
    parser.add_argument("--batch-size", type=int, help="examples per step (default 32)")
    parser.add_argument("--steps", type=int, help="profiled steps kept (default 20)")
    parser.add_argument("--warmup", type=int, help="warm-up steps discarded (default 5)")
    parser.add_argument("--device", help="cpu or cuda[:N] (default cpu)")
    parser.add_argument(
        "--input-shape",
        help="input shape without the batch dimension, e.g. 3x224x224 (needed with --model-path "
        "unless the factory says; overrides a built-in model's default)",
    )
    parser.add_argument("--num-classes", type=int, help="classes of the synthetic labels")
    parser.add_argument("--seed", type=int, help="seed of the synthetic data (default 0)")
    parser.add_argument(
        "--threads",
        type=int,
        help="torch's intra-op threads while profiling (default: torch's, one per core); give "
        "the threads each worker will have, e.g. 1 for 2 workers sharing a 2-core host",
    )
    parser.add_argument("-o", "--out", help="output trace file (.json, or .json.gz compressed)")
    parser.add_argument("--force", action="store_true", help="overwrite an existing output file")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    add_output_options(parser, table=False)
    parser.set_defaults(handler=run)


def parse_shape(text: str | None) -> tuple[int, ...] | None:
    """``3x224x224`` -> ``(3, 224, 224)``; ConfigError naming the option otherwise."""
    if text is None:
        return None
    try:
        shape = tuple(int(part) for part in text.lower().replace(",", "x").split("x"))
    except ValueError:
        shape = ()
    if not shape or any(d <= 0 for d in shape):
        raise ConfigError(
            f"--input-shape: {text!r} is not a shape; use positive sizes like 3x224x224"
        )
    return shape


def run(args: argparse.Namespace) -> int:
    if args.list_models:  # it profiles nothing: an option of a profile would do nothing
        refuse_given(
            args,
            [*PROFILE_DEFAULTS, "input_shape", "num_classes", "threads", "out", "force", "json"],
            "not with --list-models (it lists the built-in models and profiles nothing)",
        )
        from profilers.models import MODELS  # torch loads here, only for this command

        for name, spec in MODELS.items():
            print(f"{name:<18} {spec.description}")
        return 0
    fill_defaults(args, PROFILE_DEFAULTS)
    # Checked before torch loads and minutes of profiling, not after.
    if args.out is None:
        raise ConfigError(
            "--out: required; where to write the trace, e.g. traces/resnet18-b32.json"
        )
    out = check_output(args.out, "-o/--out", force=args.force)
    shape = parse_shape(args.input_shape)
    for option, value in (("--steps", args.steps), ("--warmup", args.warmup)):
        if value > MAX_PROFILE_STEPS:
            raise ConfigError(
                f"{option}: {value} steps is more than the {MAX_PROFILE_STEPS} sgdsim profiles"
            )
    _check_threads(args.threads)
    from profilers import models  # torch loads here, only for this command

    factory_path = args.model_path or (args.model if ":" in (args.model or "") else None)
    model: Any = models.load_factory(factory_path) if factory_path else args.model
    name = factory_path.rsplit(":", 1)[-1] if factory_path else args.model
    try:
        trace = _profile(args, model, name, shape)
    except SgdsimError:
        raise
    except (RuntimeError, MemoryError) as err:  # e.g. a batch that does not fit in memory
        first_line = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ProfilingError(
            f"--batch-size: profiling {name} with {args.batch_size} examples per step failed: "
            f"{first_line}"
        ) from None
    path = save_trace(trace, out, overwrite=args.force)
    summary = summarize(trace)
    fwd, bwd = summary.phase_s["forward"].mean, summary.phase_s["backward"].mean
    overhead = summary.overhead_s["total"].mean if summary.overhead_s else 0.0
    if args.json:  # the trace it wrote, as `trace show --json` shows one
        points, context = trace_show_document(trace, summary)
        print_json(args, "profile", points, context={**context, "written": str(path)})
        return 0
    threads = trace.metadata.host.get("torch_threads")
    print(
        f"wrote {path}: {summary.n_layers} layers, {len(trace.ops)} ops/step, "
        f"{trace.n_steps} steps; forward {fwd * 1e3:.2f} ms, backward {bwd * 1e3:.2f} ms, "
        f"fixed overhead {overhead * 1e3:.2f} ms per step; {threads} torch thread(s)"
    )
    return 0


def _check_threads(threads: int | None) -> None:
    """ConfigError naming ``--threads`` unless it is None (torch's default) or 1..the maximum."""
    if threads is None:
        return
    if threads < 1:
        raise ConfigError(f"--threads: must be an integer >= 1, got {threads}")
    if threads > MAX_PROFILE_THREADS:
        raise ConfigError(
            f"--threads: {threads} is more than the {MAX_PROFILE_THREADS} threads sgdsim "
            "profiles with"
        )


def _profile(args: argparse.Namespace, model: Any, name: str, shape: tuple[int, ...] | None) -> Any:
    """The trace of ``model`` profiled as the options say."""
    import profilers

    return profilers.profile_model(
        model,
        batch_size=args.batch_size,
        steps=args.steps,
        warmup=args.warmup,
        device=args.device,
        input_shape=shape,
        num_classes=args.num_classes,
        model_name=name,
        seed=args.seed,
        progress=Progress(f"profiling {name}", "steps", enabled=not args.quiet),
        threads=args.threads,
    )
