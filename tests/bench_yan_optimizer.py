"""Search time of the Yan et al. optimizers as the machines N and layers L grow.

Run by hand: ``python tests/bench_yan_optimizer.py``. The exhaustive search tries every
configuration with every segment-to-worker mapping; the polynomial one (greedy mapping plus
dynamic programming over layers) is run on the same instances and on larger ones. Both use one
thread count choice (H = 1) so that the figures show the growth in N and L alone. Instances
whose brute force would score more than ``BRUTE_LIMIT_CONFIGS`` configurations are skipped
for it (the count is printed).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_yan_optimizer import random_hardware, random_network

from simcore.analytic.yan import SearchSpace, exhaustive_search, polynomial_search

SEED = 2015
BRUTE_LIMIT_CONFIGS = 1_000_000  # about 30 s of brute force
SMALL = [(n, layers) for n in (2, 3, 4, 5) for layers in (1, 2, 3, 4)]
LARGE = [(8, 4), (8, 8), (12, 8), (16, 8), (20, 8)]


def timed(run: object) -> tuple[float, float]:
    start = time.perf_counter()
    result = run()  # type: ignore[operator]
    return time.perf_counter() - start, result.epoch_s


def brute_force_size(machines: int, layers: int) -> int:
    """Configurations the exhaustive search scores (H = 1): per resource triple, the
    (plan, mapping) choices per layer raised to the number of layers."""
    total = 0
    for n_ps in range(1, machines):
        for n_wr in range(1, machines - n_ps + 1):
            per_layer = sum(
                math.perm(n_wr, p * r) for p in range(1, n_wr + 1) for r in range(1, n_wr // p + 1)
            )
            total += (machines - n_ps) // n_wr * per_layer**layers
    return total


def main() -> None:
    print(f"{'N':>3} {'L':>3} {'configs':>13} {'exhaustive s':>13} {'polynomial s':>13}  same")
    for n, layers in [*SMALL, *LARGE]:
        rng = np.random.default_rng(SEED + 10 * n + layers)
        network, hw = random_network(rng, layers), random_hardware(rng)
        space = SearchSpace(machines=n, threads=(1,))
        fast_s, fast = timed(lambda: polynomial_search(network, hw, space))  # noqa: B023
        size = brute_force_size(n, layers)
        brute_text, same = "skipped", "-"
        if size <= BRUTE_LIMIT_CONFIGS:
            brute_s, brute = timed(lambda: exhaustive_search(network, hw, space))  # noqa: B023
            brute_text = f"{brute_s:.3f}"
            same = "yes" if abs(brute - fast) <= 1e-9 * brute else f"NO ({brute} vs {fast})"
        print(f"{n:>3} {layers:>3} {size:>13.3g} {brute_text:>13} {fast_s:13.3f}  {same}")


if __name__ == "__main__":
    main()
