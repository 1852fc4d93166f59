"""The real DDP runner: torch's DistributedDataParallel on loopback, against our bucket rule.

Each run spawns W gloo ranks on 127.0.0.1. The buckets the real reducer all-reduced (recorded by
the runner's comm hook once torch rebuilt them after the first step) must be the ones
:func:`simcore.sim.buckets.trace_buckets` derives from a profile of the same model: that is the
simulator's claim that it buckets as DDP does.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
import torch
from test_distributed_runner import RUN_TIMEOUT_S, TINY, _assert_same_parameters, _single_process

from profilers.distributed import RunConfig, run_distributed
from profilers.distributed.__main__ import main as command_main
from profilers.distributed.records import load_run
from profilers.layer_profiler import profile_model
from simcore.errors import ConfigError
from simcore.sim.buckets import trace_buckets

pytestmark = pytest.mark.slow

MIB = 2**20


def _config(**kwargs: Any) -> RunConfig:
    base: dict[str, Any] = {
        "model": TINY,
        "architecture": "ddp",
        "servers": 0,
        "workers": 2,
        "batch_size": 16,
        "steps": 8,
        "warmup": 2,
        "threads": 1,
        "timeout_s": RUN_TIMEOUT_S,
    }
    base.update(kwargs)
    return RunConfig(**base)


def test_ddp_trains_like_one_process_on_the_union_batch_and_times_every_bucket() -> None:
    """DDP averages the workers' gradients: the same SGD as one process on both batches. A
    256-byte cap splits TinyNet (weights of 2 KiB, 4 KiB and 512 B) into several buckets;
    every step of every worker all-reduces each once, launched in index order, before the
    step's updates."""
    config = _config(bucket_cap_mb=256 / MIB)
    result = run_distributed(config)
    _assert_same_parameters(result, _single_process(config))
    assert len(result.buckets) >= 3
    assert [b.index for b in result.buckets] == list(range(len(result.buckets)))
    names = [n for b in result.buckets for n in b.params]
    assert sorted(names) == sorted(
        f"fc{i}.{kind}" for i in (1, 2, 3) for kind in ("bias", "weight")
    )
    by_step: dict[tuple[int, int], list[Any]] = defaultdict(list)
    for span in result.spans:
        by_step[span.worker, span.step].append(span)
    for (_, step), spans in by_step.items():
        reduces = sorted((s for s in spans if s.kind == "allreduce"), key=lambda s: s.start_s)
        if step >= 1:  # step 0 reduces everything in one bucket, before torch rebuilds them
            assert [s.layer for s in reduces] == [f"bucket{b.index}" for b in result.buckets]
        last_end = max(s.start_s + s.duration_s for s in reduces)
        updates = [s for s in spans if s.kind == "update"]
        assert len(updates) == 3 and min(s.start_s for s in updates) >= last_end


def test_fp16_compression_trains_close_to_float32() -> None:
    """torch's fp16_compress_hook sums float16 gradients: the parameters stay close to one
    float32 process's, and the loss falls."""
    config = _config(comm_hook="fp16", steps=20, lr=0.05)
    result = run_distributed(config)
    for worker in (0, 1):
        losses = result.losses(worker)
        assert sum(losses[-4:]) < sum(losses[:4])
    reference = _single_process(config)
    for name, value in reference.items():  # float16 sums: close, not equal
        torch.testing.assert_close(result.final_state[name], value, rtol=0.05, atol=5e-3)


@pytest.mark.parametrize(
    ("model", "cap_mb", "first_mb"),
    [("cnn", None, None), ("cnn", 0.25, None), ("mlp", 1.0, None), ("transformer", 0.5, 0.125)],
)
def test_the_real_reducer_buckets_as_the_simulator_does(
    model: str, cap_mb: float | None, first_mb: float | None
) -> None:
    """The buckets of a real DDP run equal those the simulator derives from a profile of the
    same model (torch's defaults, a cap given alone, and a first bucket of its own)."""
    config = _config(
        model=model, bucket_cap_mb=cap_mb, first_bucket_mb=first_mb, batch_size=4, steps=3
    )
    real = run_distributed(config).buckets
    trace = profile_model(model, batch_size=4, steps=1, warmup=0)
    rule = trace_buckets(trace, *config.bucket_limits_bytes())
    assert [(b.nbytes, b.params) for b in real] == [
        (b.nbytes, tuple(t.name for t in b.tensors)) for b in rule
    ]


def test_the_module_command_runs_ddp_and_saves_its_buckets(tmp_path: Any) -> None:
    out = tmp_path / "run.json"
    argv = ["--model", TINY, "--arch", "ddp", "--workers", "2", "--steps", "4", "--warmup", "1"]
    assert command_main([*argv, "--threads", "1", "--bucket-cap", "512B", "-o", str(out)]) == 0
    run = load_run(out)
    assert run.config.bucket_cap_mb == 512 / MIB and run.buckets
    assert sum(b.nbytes for b in run.buckets) == sum(run.layer_nbytes.values())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"bucket_cap_mb": 0}, "bucket_cap_mb: must be > 0 MiB, got 0"),
        ({"first_bucket_mb": -1.0}, "first_bucket_mb: must be > 0 MiB, got -1.0"),
        ({"architecture": "allreduce", "bucket_cap_mb": 1}, "bucket_cap_mb: a DDP setting"),
        ({"comm_hook": "int8"}, "comm_hook: 'int8' is not one of allreduce, fp16"),
        ({"overlap": "strict"}, "overlap: DDP all-reduces buckets during the backward pass"),
        ({"servers": 1}, "servers: ddp has no parameter servers; got 1"),
    ],
)
def test_bad_ddp_settings_are_one_clear_line(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _config(**kwargs)
