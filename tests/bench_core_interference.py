"""How much one core's work slows a computation on the other (a script; pytest does not collect it).

The validation's testbed pins the parameter server to core 0 and the workers to core 1, and the
predictions treat the server's work as costing the workers nothing. This times a convolution
(cnn-like, batch 16) pinned to core 1 while core 0 is idle, runs a Python loop (CPU only), or
copies memory (what a server moving gradients does most), and prints each time and the slowdown.
On the 2-core development VM: 6.5 ms idle, +4% beside the loop, +20% beside the copies.

    python tests/bench_core_interference.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time
from typing import Any


def _conv_ms(seconds: float) -> float:
    import torch

    torch.set_num_threads(1)
    os.sched_setaffinity(0, {1})
    conv = torch.nn.Conv2d(32, 64, 3, padding=1)
    x = torch.randn(16, 32, 32, 32)
    for _ in range(3):
        conv(x)
    start, n = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        conv(x)
        n += 1
    return (time.perf_counter() - start) / n * 1e3


def _load(kind: str, stop: Any) -> None:
    import numpy as np

    os.sched_setaffinity(0, {0})
    a = np.ones(8_000_000, dtype=np.float32)  # 32 MB: beyond the caches
    b = np.empty_like(a)
    while not stop.is_set():
        if kind == "loop":
            total = 0
            for i in range(100_000):
                total += i
        else:
            np.copyto(b, a)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=3.0, help="timing per case (3)")
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) < 2 or not {0, 1} <= os.sched_getaffinity(0):
        raise SystemExit("needs cores 0 and 1")
    idle = _conv_ms(args.seconds)
    print(f"core 0 idle:            {idle:.2f} ms per convolution on core 1")
    for kind in ("loop", "memcpy"):
        stop = multiprocessing.Event()
        load = multiprocessing.Process(target=_load, args=(kind, stop))
        load.start()
        time.sleep(0.5)
        try:
            ms = _conv_ms(args.seconds)
        finally:
            stop.set()
            load.join()
        print(f"core 0 running {kind:7s}: {ms:.2f} ms ({100 * (ms / idle - 1):+.0f}%)")


if __name__ == "__main__":
    main()
