"""Real distributed training on loopback: correctness against one process, traces, and faults.

Each test spawns its ranks (servers, then workers) with gloo on 127.0.0.1. The model is the tiny
:class:`TinyNet` below, which spawned ranks import from this module by name.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from profilers.distributed import (
    DistributedRunError,
    ProgressEvent,
    RunConfig,
    RunResult,
    batch_index,
    build_setup,
    run_distributed,
    run_timeline_spans,
    run_to_trace,
    save_run_json,
    spawn,
    synthetic_batch,
)
from profilers.distributed.__main__ import main as command_main
from profilers.distributed.to_trace import COMPUTATION_KINDS, pooled_trace, with_compute_of
from simcore.errors import ConfigError
from simcore.export.chrome import chrome_trace
from simcore.trace.build import ps_step_ops
from simcore.trace.io import load_trace, save_trace
from simcore.trace.model import OpKind, Resource

TINY = "test_distributed_runner:TinyNet"

# The timeout also bounds the start-up: the rendezvous, and the parent's wait for each rank's first
# report. On a loaded 2-core machine the ranks took up to 28 s to report their first step (torch's
# import in the forkserver alone took 10-17 s), so tests that do not test a timeout keep the
# default; a timeout only costs time when something fails.
RUN_TIMEOUT_S = 60.0


class TinyNet(nn.Module):
    """16 inputs, two 32-unit hidden layers, 4 classes: three parameterized layers."""

    input_shape = (16,)
    num_classes = 4

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(32, 32)
        self.fc3 = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> Any:
        return self.fc3(self.act(self.fc2(self.act(self.fc1(x)))))


class TiedTokenNet(nn.Module):
    """A language-model shape: token ids in, an embedding whose table the output layer shares."""

    input_shape = (5,)

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(30, 8)
        self.mid = nn.Linear(8, 8)
        self.out = nn.Linear(8, 30, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, x: torch.Tensor) -> Any:
        return self.out(torch.relu(self.mid(self.emb(x).mean(1))))


class FrozenStemNet(nn.Module):
    """A frozen first layer under two trained ones (fine-tuning a pretrained stem)."""

    input_shape = (16,)
    num_classes = 4

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(16, 32)
        self.stem.requires_grad_(False)
        self.fc = nn.Linear(32, 32)
        self.head = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> Any:
        return self.head(torch.relu(self.fc(torch.relu(self.stem(x)))))


def _config(**kwargs: Any) -> RunConfig:
    base: dict[str, Any] = {
        "model": TINY,
        "batch_size": 16,
        "steps": 12,
        "warmup": 2,
        "threads": 1,
        "timeout_s": RUN_TIMEOUT_S,
    }
    base.update(kwargs)
    return RunConfig(**base)


def _single_process(config: RunConfig) -> dict[str, torch.Tensor]:
    """SGD in one process on the concatenation of every worker's batch, step by step.

    The mean loss over the union of equal batches is the mean of the workers' mean losses, so its
    gradient is the mean of their gradients: what PS Sync-SGD and AllReduce apply.
    """
    setup = build_setup(config)
    model = setup.module
    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr, momentum=config.momentum)
    for step in range(config.steps):
        parts = [
            synthetic_batch(setup, config.seed, w, batch_index(step), config.batch_size)
            for w in range(config.workers)
        ]
        inputs = torch.cat([x for x, _ in parts])
        labels = torch.cat([y for _, y in parts])
        optimizer.zero_grad()
        F.cross_entropy(model(inputs), labels).backward()
        optimizer.step()
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def _assert_same_parameters(result: RunResult, expected: dict[str, torch.Tensor]) -> None:
    """The run's trained parameters (frozen ones are never sent) equal one process's."""
    trained = {
        n for n, p in build_setup(result.config).module.named_parameters() if p.requires_grad
    }
    expected = {name: value for name, value in expected.items() if name in trained}
    assert set(result.final_state) == set(expected)
    for name, value in expected.items():
        torch.testing.assert_close(result.final_state[name], value, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("overlap", ["layerwise", "strict"])
def test_one_async_worker_trains_like_one_process_and_gives_a_trace(
    tmp_path: Any, overlap: str
) -> None:
    config = _config(architecture="ps-async", workers=1, overlap=overlap)
    result = run_distributed(config)
    _assert_same_parameters(result, _single_process(config))
    assert len(result.steps) == config.steps
    # the trace: the profiler's ops (strict phases too), measured compute and communication
    trace = run_to_trace(result)
    setup = build_setup(config)
    layers = [layer.to_layer() for layer in setup.layers]
    expected = ps_step_ops(layers, setup.layer_inputs, overlap=overlap == "layerwise")
    assert [(op.id, op.deps) for op in trace.ops] == [(op.id, op.deps) for op in expected]
    assert trace.n_steps == config.steps - config.warmup
    for op, duration in zip(trace.ops, trace.steps[0].duration_s, strict=True):
        assert duration is not None, op.id
    assert trace.phase_time_s(0, OpKind.PULL) > 0 and trace.phase_time_s(0, OpKind.UPDATE) > 0
    save_trace(trace, tmp_path / "w1.json")
    assert load_trace(tmp_path / "w1.json").n_steps == trace.n_steps
    save_run_json(result, tmp_path / "run.json")
    assert (tmp_path / "run.json").stat().st_size > 0


@pytest.mark.parametrize("model", ["TiedTokenNet", "FrozenStemNet"])
@pytest.mark.parametrize("architecture", ["ps-sync", "allreduce"])
def test_token_id_inputs_and_frozen_parameters_train_like_one_process(
    model: str, architecture: str
) -> None:
    """Token ids drawn below the embedding's size; frozen parameters neither sent nor changed;
    tied weights moved once. Two workers give one process's parameters on the union batch."""
    servers = 0 if architecture == "allreduce" else 1
    config = _config(
        model=f"test_distributed_runner:{model}",
        architecture=architecture,
        servers=servers,
        workers=2,
    )
    setup = build_setup(config)
    inputs, _ = synthetic_batch(setup, config.seed, 0, 0, config.batch_size)
    assert inputs.dtype == (torch.int64 if model == "TiedTokenNet" else torch.float32)
    result = run_distributed(config)
    _assert_same_parameters(result, _single_process(config))
    sent = sum(layer.nbytes for layer in setup.param_layers)
    if model == "TiedTokenNet":
        assert sent == (30 * 8 + 8 * 8 + 8) * 4  # the shared table once
    else:
        assert sent == ((32 * 32 + 32) + (32 * 4 + 4)) * 4  # the stem is not trained
        assert "stem.weight" not in result.final_state


class AllFrozenNet(FrozenStemNet):
    def __init__(self) -> None:
        super().__init__()
        self.requires_grad_(False)


def test_a_model_with_nothing_to_train_is_named_as_the_cause() -> None:
    config = _config(model="test_distributed_runner:AllFrozenNet", workers=1)
    with pytest.raises(DistributedRunError, match=r"AllFrozenNet.*no trained parameters"):
        run_distributed(config)


def test_a_run_without_transfers_gives_the_trace_its_computation_alone() -> None:
    ps_run = run_distributed(_config(architecture="ps-async", workers=1))
    ring_run = run_distributed(_config(architecture="allreduce", servers=0, workers=1))
    trace = run_to_trace(ps_run)
    alone = with_compute_of(trace, ring_run)
    assert [op.id for op in alone.ops] == [op.id for op in trace.ops]
    assert alone.n_steps == trace.n_steps
    measured = sorted({s.step for s in ring_run.spans if s.step >= ring_run.config.warmup})
    for n, (before, after) in enumerate(zip(trace.steps, alone.steps, strict=True)):
        step = measured[n % len(measured)]
        spans = {
            f"{s.kind}:{s.layer}": s.duration_s
            for s in ring_run.spans
            if s.step == step and s.kind in ("forward", "backward", "update")
        }
        for op, old, new in zip(trace.ops, before.duration_s, after.duration_s, strict=True):
            if op.resource is Resource.WORKER:
                # the run's own time for the op, plus any idle gap before it (as run_to_trace)
                assert new is not None and new >= round(spans.get(op.id, 0.0), 9) - 1e-9, op.id
            elif op.kind is OpKind.UPDATE:  # the ring worker's own SGD step on the layer,
                # plus any wait beyond its one-worker all-reduce's return
                assert new is not None and new >= round(spans[op.id], 9) - 1e-9, op.id
            else:
                assert new == old, op.id  # the transfers as measured
    # Charged gaps never add up to more than the worker had: the computation of a step is at
    # most the time from the previous step's end to this one's.
    computation = [i for i, op in enumerate(trace.ops) if op.kind.value in COMPUTATION_KINDS]
    ends = {s.step: s.end_s for s in ring_run.steps}
    period = {n: end - ends[n - 1] for n, end in ends.items() if n - 1 in ends}
    for n, after in enumerate(alone.steps):
        step = measured[n % len(measured)]
        if step in period:
            assert sum(after.duration_s[i] or 0.0 for i in computation) <= period[step] + 1e-6
    # The first forward also carries the time since the previous step ended (the step's
    # bookkeeping, which the measured throughput counts).
    first = next(i for i, op in enumerate(trace.ops) if op.kind is OpKind.FORWARD)
    for n, after in enumerate(alone.steps):
        step = measured[n % len(measured)]
        if step - 1 not in ends:
            continue
        span = next(
            s
            for s in ring_run.spans
            if s.step == step and f"{s.kind}:{s.layer}" == trace.ops[first].id
        )
        idle = span.start_s - ends[step - 1]
        assert idle > 0
        assert after.duration_s[first] == pytest.approx(span.duration_s + idle, abs=1e-8)
    with pytest.raises(ConfigError, match="without transfers"):
        with_compute_of(trace, ps_run)
    other = run_distributed(_config(architecture="allreduce", servers=0, workers=1, batch_size=8))
    with pytest.raises(ConfigError, match="batch 8"):
        with_compute_of(trace, other)


def test_a_profile_pools_the_steps_of_several_one_worker_runs() -> None:
    config = _config(architecture="ps-async", workers=1)
    first, second = run_distributed(config), run_distributed(config)
    one, other = run_to_trace(first), run_to_trace(second)
    pooled = pooled_trace([first, second])
    assert [op.id for op in pooled.ops] == [op.id for op in one.ops]
    assert pooled.steps == one.steps + other.steps  # in order, as each run gives them
    assert pooled.metadata.profiled_steps == one.n_steps + other.n_steps
    single = pooled_trace([first])  # one run: its own trace, up to when it was made
    stamp = dataclasses.replace(single.metadata, created_utc=one.metadata.created_utc)
    assert dataclasses.replace(single, metadata=stamp) == one
    # the computation alone pools its runs' steps alike: step n takes pooled row n
    rings = [
        run_distributed(_config(architecture="allreduce", servers=0, workers=1)) for _ in range(2)
    ]
    alone = with_compute_of(pooled, rings)
    each = [with_compute_of(one, ring) for ring in rings]
    assert alone.steps[: one.n_steps] == each[0].steps
    computation = [i for i, op in enumerate(one.ops) if op.kind.value in COMPUTATION_KINDS]
    for n in range(one.n_steps):
        got = [alone.steps[one.n_steps + n].duration_s[i] for i in computation]
        assert got == [each[1].steps[n].duration_s[i] for i in computation]
    strict = run_distributed(_config(architecture="ps-async", workers=1, overlap="strict"))
    with pytest.raises(ConfigError, match="not the same configuration"):
        pooled_trace([first, strict])
    with pytest.raises(ConfigError, match="no run"):
        pooled_trace([])


@pytest.mark.parametrize(
    ("architecture", "servers", "overlap"),
    [("ps-sync", 2, "strict"), ("allreduce", 0, "layerwise")],
)
def test_synchronous_runs_equal_one_process_on_the_union_batch(
    architecture: str, servers: int, overlap: str
) -> None:
    config = _config(architecture=architecture, servers=servers, workers=2, overlap=overlap)
    result = run_distributed(config)
    _assert_same_parameters(result, _single_process(config))
    kinds = {span.kind for span in result.spans}
    assert kinds >= {"forward", "backward", "update"}
    assert ("pull" in kinds) == (architecture != "allreduce")


def test_two_async_workers_learn_and_report_throughput() -> None:
    config = _config(architecture="ps-async", workers=2, steps=30, warmup=5, lr=0.05)
    result = run_distributed(config)
    for worker in (0, 1):
        losses = result.losses(worker)
        assert statistics.fmean(losses[-5:]) < 0.8 * statistics.fmean(losses[:5])
    assert result.examples_per_s > 0
    assert len(result.step_times_s()) == 2 * (config.steps - config.warmup)
    # every layer of every step was pulled, computed, pushed and applied for each worker
    per_kind = {k: 0 for k in ("pull", "forward", "push", "update")}
    for span in result.spans:
        if span.kind in per_kind:
            per_kind[span.kind] += 1
    assert per_kind["pull"] == per_kind["push"] == per_kind["update"] == 2 * config.steps * 3
    assert result.slowdown_vs(result).ratio == pytest.approx(1.0)
    # the measured timeline, laid out like the simulator's
    events = chrome_trace(run_timeline_spans(result))["traceEvents"]
    processes = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert processes == {"server 0", "worker 0", "worker 1"}
    assert min(e["ts"] for e in events if e["ph"] == "X") >= 0


def test_module_command_writes_the_run_its_trace_and_timeline(tmp_path: Any) -> None:
    paths = {name: tmp_path / f"{name}.json" for name in ("run", "trace", "chrome")}
    argv = ["--model", TINY, "--workers", "1", "--steps", "6", "--warmup", "1", "--threads", "1"]
    argv += ["-o", str(paths["run"]), "--trace-out", str(paths["trace"])]
    assert command_main([*argv, "--chrome-out", str(paths["chrome"])]) == 0
    run = json.loads(paths["run"].read_text(encoding="utf-8"))
    assert run["config"]["model"] == TINY and len(run["steps"]) == 6
    assert load_trace(paths["trace"]).n_steps == 5
    assert json.loads(paths["chrome"].read_text(encoding="utf-8"))["traceEvents"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# A short timeout detects the hung worker quickly, but the ranks must start within it too (see
# RUN_TIMEOUT_S): a run that failed before the strike is repeated with a longer one.
STRIKE_TIMEOUTS_S = (3.0, 15.0, RUN_TIMEOUT_S)


def _strike_worker(sig: int, timeout_s: float) -> tuple[set[int], list[float], str]:
    """Run 2 async workers, send ``sig`` to worker 1 at its step 3; return every rank's pid, when
    the signal went (empty: the run failed before) and the error."""
    pids: set[int] = set()
    struck: list[float] = []

    def strike(event: ProgressEvent) -> None:
        pids.add(event.pid)
        if event.role == "worker" and event.rank == 2 and event.step >= 3 and not struck:
            struck.append(time.monotonic())
            os.kill(event.pid, sig)

    config = _config(architecture="ps-async", workers=2, steps=10_000, timeout_s=timeout_s)
    with pytest.raises(DistributedRunError) as caught:
        run_distributed(config, progress=strike)
    return pids, struck, str(caught.value)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP], ids=["dies", "hangs"])
def test_a_dead_or_hung_worker_ends_the_run_and_leaves_no_process(sig: int) -> None:
    for timeout_s in STRIKE_TIMEOUTS_S:
        pids, struck, error = _strike_worker(sig, timeout_s)
        if struck:
            break
        assert not [pid for pid in pids if _alive(pid)]  # a start-up failure leaves none either
    else:
        pytest.fail(f"no run reached step 3 of worker 1; the last one: {error}")
    ended = time.monotonic()
    # the culprit is named: the dead worker, or the one that went silent
    culprit = "died (killed by signal 9)" if sig == signal.SIGKILL else "has reported nothing"
    assert f"worker 1 (rank 2) {culprit}" in error
    assert len(pids) == 3
    assert not [pid for pid in pids if _alive(pid)]
    # A death is seen at once; a hang after gloo's timeout in a peer, or after the parent's own
    # limit (timeout + grace) at the latest; then stopping takes two waits per rank at most.
    # Twice that leaves room for a loaded machine, not for a rank left to gloo's default timeout
    # (30 min).
    limit_s = timeout_s + spawn._GRACE_S + 2 * spawn._STOP_WAIT_S
    assert ended - struck[0] < 2 * limit_s


def _running(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


_CALLER = """
import sys
from profilers.distributed import RunConfig, run_distributed

def report(event):
    print(event.pid, flush=True)

if __name__ == "__main__":
    config = RunConfig("test_distributed_runner:TinyNet", workers=1, steps=10**7, threads=1)
    run_distributed(config, progress=report)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs Linux /proc")
def test_ranks_end_when_their_caller_is_killed(tmp_path: Any) -> None:
    script = tmp_path / "caller.py"
    script.write_text(_CALLER, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), *sys.path])}
    caller = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert caller.stdout is not None
        pids: set[int] = set()
        while len(pids) < 2:  # the server and the worker report progress
            pids.add(int(caller.stdout.readline()))
    finally:
        caller.kill()
        caller.wait()
    # Each rank checks every _CALLER_POLL_S that its caller lives; allow many polls on a loaded
    # machine (the loop ends as soon as they are gone).
    deadline = time.monotonic() + 60 * spawn._CALLER_POLL_S
    while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in pids if _running(pid)]
