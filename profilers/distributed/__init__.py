"""Real distributed data-parallel training with per-layer timestamps (TPDS'22 section 4.1).

W workers and P parameter servers (or a ring AllReduce) train a built-in or user model on a
learnable synthetic task with ``torch.distributed`` (gloo), as processes on one machine or one rank
per machine under torchrun. Every layer's pull, forward, backward, push (or all-reduce) and server
update is timestamped; the result gives the measured throughput, per-step times, the co-location
slowdown of computation against a solo run and, with one worker, a trace in sgdsim's format with
the measured communication.

>>> from profilers.distributed import RunConfig, run_distributed
>>> result = run_distributed(RunConfig("mlp", architecture="ps-sync", workers=2, steps=10))
>>> result.examples_per_s  # doctest: +SKIP
"""

from profilers.distributed.config import (
    Architecture,
    DistributedRunError,
    Overlap,
    RunConfig,
)
from profilers.distributed.export import run_timeline_spans, save_run_chrome
from profilers.distributed.launch import (
    RankOutput,
    combine,
    place_layers,
    run_rank,
    run_rank_from_env,
)
from profilers.distributed.records import RunResult, SlowdownReport, Span, StepRecord, save_run_json
from profilers.distributed.spawn import ProgressEvent, run_distributed
from profilers.distributed.task import build_setup, synthetic_batch
from profilers.distributed.to_trace import run_to_trace
from profilers.distributed.worker import BATCH_POOL, batch_index

__all__ = [
    "BATCH_POOL",
    "Architecture",
    "DistributedRunError",
    "Overlap",
    "ProgressEvent",
    "RankOutput",
    "RunConfig",
    "RunResult",
    "SlowdownReport",
    "Span",
    "StepRecord",
    "batch_index",
    "build_setup",
    "combine",
    "place_layers",
    "run_distributed",
    "run_rank",
    "run_rank_from_env",
    "run_timeline_spans",
    "run_to_trace",
    "save_run_chrome",
    "save_run_json",
    "synthetic_batch",
]
