"""Benchmark: the per-layer profiler's overhead on each built-in model.

For every built-in model at one batch size, prints the median wall time of one SGD step
(forward, cross-entropy loss, backward, SGD update with momentum 0.9) run plainly, and the same
step under ``profilers.profile_model`` (fx interpreter, per-node timestamps, autograd hooks,
per-layer optimizer steps), and the overhead in percent. Not collected by pytest; run it as

    python tests/bench_profiler.py [--batch-size 8] [--steps 5] [--models mlp,cnn]

Both variants run the same model on the same synthetic batch in the same process. The plain loop
runs both before and after the profiled one and its median is taken over both runs, so that
warm-up and drift (allocator, CPU clocks) do not favour either side. Step times on a VM vary by
several percent from step to step: an overhead within that spread is noise. Run it on a quiet
machine; any other busy process inflates both columns.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from profilers import models, profile_model


def plain_step_times(name: str, batch_size: int, steps: int, warmup: int) -> list[float]:
    """Wall time of each uninstrumented training step (the loop a user would write)."""
    torch.manual_seed(0)
    spec = models.get_spec(name)
    model = spec.factory(spec.num_classes).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn((batch_size, *spec.input_shape), generator=generator)
    labels = torch.randint(0, spec.num_classes, (batch_size,), generator=generator)
    times = []
    for i in range(warmup + steps):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(inputs), labels)
        torch.autograd.backward(loss)
        optimizer.step()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return times


def profiled_step_times(name: str, batch_size: int, steps: int, warmup: int) -> list[float]:
    """Wall time of each instrumented step, from one progress call to the next."""
    marks: list[float] = []
    start = time.perf_counter()
    profile_model(
        name,
        batch_size=batch_size,
        steps=steps,
        warmup=warmup,
        progress=lambda done, total: marks.append(time.perf_counter()),
    )
    ends = [start, *marks]
    return [b - a for a, b in itertools.pairwise(ends)][warmup:]


def _spread(times: list[float]) -> float:
    """Coefficient of variation of step times, in percent."""
    return 100 * statistics.pstdev(times) / statistics.mean(times)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per variant")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--models", default=",".join(models.MODELS))
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    print(
        f"per-layer profiler overhead, batch {args.batch_size}, median of {args.steps} steps "
        f"after {args.warmup} warm-up, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads"
    )
    print(
        f"{'model':<11} {'layers':>6} {'plain step':>12} {'spread':>8} {'profiled step':>14} "
        f"{'spread':>8} {'overhead':>9} {'per layer':>10}"
    )
    for name in names:
        before = plain_step_times(name, args.batch_size, args.steps, args.warmup)
        timed = profiled_step_times(name, args.batch_size, args.steps, args.warmup)
        after = plain_step_times(name, args.batch_size, args.steps, args.warmup)
        plain, profiled = statistics.median(before + after), statistics.median(timed)
        layers = len(profile_model(name, batch_size=1, steps=1, warmup=0).layers)
        print(
            f"{name:<11} {layers:>6} {plain * 1e3:>9.1f} ms {_spread(before + after):>7.1f}% "
            f"{profiled * 1e3:>11.1f} ms {_spread(timed):>7.1f}% "
            f"{100 * (profiled / plain - 1):>+8.1f}% {(profiled - plain) / layers * 1e6:>+7.0f} us"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
