"""A step's fixed costs outside its layers (``overhead:begin``/``overhead:end``): measured by the
profiler as wall minus layers, placed in the step DAG, run on the worker's compute, shown."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from profilers import profile_model
from simcore.analytic.params import worker_type_from_trace
from simcore.cli.main import main
from simcore.export.chrome import OVERHEAD, display_kind
from simcore.sim import SimulationConfig, SimulationResult, simulate
from simcore.trace.build import synthetic_trace
from simcore.trace.io import save_trace
from simcore.trace.model import SCHEMA_VERSION, OpKind, Resource, Trace
from simcore.trace.overhead import (
    BEGIN_ID,
    END_ID,
    add_overhead,
    overhead_matrix,
    step_layer_sum_s,
    with_overhead_ops,
)
from simcore.trace.parse import trace_from_dict, trace_to_dict

REL = 1e-9
B = 1e9  # bit/s


@pytest.fixture(scope="module")
def profiled() -> Trace:
    return profile_model("cnn", batch_size=2, steps=3, warmup=1)


def test_profiler_overhead_is_wall_minus_layers_per_step(profiled: Trace) -> None:
    overhead = overhead_matrix(profiled)
    assert overhead is not None and overhead.shape == (3, 2)
    for step, (begin, end) in zip(profiled.steps, overhead, strict=True):
        assert step.wall_s is not None
        layers = step_layer_sum_s(step, profiled.ops)
        assert begin >= 0 and end >= 0
        # An invariant of how they are computed (to the rounding of each op to 1 ns).
        assert begin + end == pytest.approx(step.wall_s - layers, abs=1e-8 * len(profiled.ops))
        # The wall covers the phases measured inside it.
        assert step.forward_s is not None and step.backward_s is not None
        assert step.wall_s >= step.forward_s + step.backward_s


def test_profiler_places_overhead_around_the_step(profiled: Trace) -> None:
    ops = profiled.ops
    assert ops[0].id == BEGIN_ID and ops[-1].id == END_ID
    for op in (ops[0], ops[-1]):
        assert (op.kind, op.resource, op.layer, op.nbytes) == (
            OpKind.OTHER,
            Resource.WORKER,
            None,
            None,
        )
    assert ops[0].deps == ()
    first_forward = next(op for op in ops if op.kind is OpKind.FORWARD)
    assert BEGIN_ID in first_forward.deps
    # The last backward is that of the first layer, after which nothing else is computed.
    assert ops[-1].deps == (f"backward:{profiled.layers[0].name}",)
    assert profiled.schema_version == SCHEMA_VERSION >= 2  # fixed-cost ops since version 2


def test_placement_on_a_branching_model() -> None:
    # l0 and l1 are both sources; l2 joins them: both first forwards wait for the begin op, and
    # the end op waits for both last backwards (no backward waits for either).
    trace = synthetic_trace([1, 1, 1], [1, 1, 1], [4, 4, 4], inputs={"l2": ["l0", "l1"]})
    ops = {op.id: op for op in with_overhead_ops(trace.ops)}
    assert BEGIN_ID in ops["forward:l0"].deps and BEGIN_ID in ops["forward:l1"].deps
    assert BEGIN_ID not in ops["forward:l2"].deps
    assert set(ops[END_ID].deps) == {"backward:l0", "backward:l1"}


def test_overhead_survives_a_round_trip_and_old_traces_load() -> None:
    trace = add_overhead(synthetic_trace([0.01], [0.02], [0]), 0.003, 0.004)
    again = trace_from_dict(trace_to_dict(trace))
    assert again.ops == trace.ops and again.steps == trace.steps
    old = trace_to_dict(synthetic_trace([0.01], [0.02], [0]))
    old["schema_version"] = 1
    loaded = trace_from_dict(old)
    assert loaded.schema_version == 1 and overhead_matrix(loaded) is None


def run(trace: Trace, **kw: object) -> SimulationResult:
    base: dict[str, object] = {"bandwidth_bps": B, "steps": 6, "warmup_steps": 1}
    base.update(kw)
    return simulate(trace, SimulationConfig(**base))  # type: ignore[arg-type]


@pytest.mark.parametrize("arch", ["ps", "allreduce"])
def test_one_worker_without_transfers_takes_step_plus_overhead(arch: str) -> None:
    # Parameter-free: nothing to send, so the step is its computation, and the fixed costs add
    # to it exactly (closed form: sum of forwards + backwards + begin + end).
    fwd, bwd, begin, end = [0.010, 0.020], [0.030, 0.005], 0.004, 0.007
    base = synthetic_trace(fwd, bwd, [0, 0])
    mode = "sync" if arch == "allreduce" else "async"
    result = run(add_overhead(base, begin, end), arch=arch, mode=mode)
    step = sum(fwd) + sum(bwd) + begin + end
    assert 1.0 / result.steps_per_s.value == pytest.approx(step, rel=REL)
    plain = run(base, arch=arch, mode=mode)
    assert 1.0 / plain.steps_per_s.value == pytest.approx(step - begin - end, rel=REL)


@pytest.mark.parametrize("begin", [0.002, 0.012])
def test_one_ps_worker_overlaps_begin_with_the_pull_and_end_with_the_push(begin: float) -> None:
    # One layer of 1 MB at 1 Gbit/s: pull and push take 8 ms each. The begin op runs beside the
    # pull (the forward waits for both); the end op runs beside the push and the server's update.
    f, b, u, end, size = 0.010, 0.020, 0.001, 0.003, 1_000_000
    transfer = 8.0 * size / B
    trace = add_overhead(synthetic_trace([f], [b], [size], update_s=u), begin, end)
    step = max(begin, transfer) + f + b + max(end, transfer + u)
    assert 1.0 / run(trace).steps_per_s.value == pytest.approx(step, rel=REL)


@pytest.mark.parametrize(
    ("mode", "arch", "devices"),
    [("async", "ps", 1), ("sync", "ps", 1), ("sync", "allreduce", 1), ("async", "ps", 2)],
)
def test_overhead_runs_on_each_workers_compute_thread(mode: str, arch: str, devices: int) -> None:
    trace = add_overhead(
        synthetic_trace(
            [[0.01, 0.02], [0.012, 0.018]], [[0.02, 0.01], [0.022, 0.012]], [10**5] * 2
        ),
        [0.003, 0.005],
        [0.004, 0.002],
    )
    extra: dict[str, object] = {}
    if devices > 1:
        extra = {"devices_per_host": devices, "intra_bandwidth_bps": 1e10}
    result = run(trace, workers=3, mode=mode, arch=arch, timeline=True, steps=5, **extra)
    assert result.timeline is not None
    records = list(result.timeline)
    overhead = [r for r in records if r.op in (BEGIN_ID, END_ID)]
    assert len(overhead) == 3 * 5 * 2  # every worker, every step, both ops
    assert {r.resource for r in overhead} == {"worker"}
    for w in range(3):
        compute = sorted(
            (r.start_s, r.end_s) for r in records if r.worker == w and r.resource == "worker"
        )
        for (_, end0), (start1, _) in itertools.pairwise(compute):
            assert start1 >= end0 - 1e-12  # one op at a time on the worker's compute
    for r in overhead:  # the begin op precedes the step's forwards, the end op ends it
        same = [x for x in records if x.worker == r.worker and x.step == r.step]
        if r.op == BEGIN_ID:
            assert all(x.start_s >= r.end_s - 1e-12 for x in same if x.kind == "forward")
        else:
            assert all(x.end_s <= r.start_s + 1e-12 for x in same if x.kind == "backward")


def test_coarse_model_counts_overhead_as_computation() -> None:
    base = synthetic_trace([0.01], [0.02], [8])
    worker = worker_type_from_trace(add_overhead(base, 0.003, 0.004))
    assert worker.forward_s == pytest.approx(0.013) and worker.backward_s == pytest.approx(0.024)


def test_overhead_shows_as_its_own_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert display_kind(BEGIN_ID, "other") == OVERHEAD == display_kind(END_ID, "other")
    trace = add_overhead(
        synthetic_trace([[0.01], [0.02]], [[0.02], [0.03]], [8]), [0.001, 0.003], 0.002
    )
    path = save_trace(trace, tmp_path / "t.json")
    assert main(["trace", "show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "overhead begin" in out and "overhead end" in out and "overhead total" in out
    assert "2.000 ms" in out  # begin: mean of 1 and 3 ms
    data = trace_to_dict(synthetic_trace([0.01], [0.02], [8]))
    data["schema_version"] = 1
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    assert main(["trace", "show", str(old)]) == 0
    assert "not measured (a schema v1 trace" in capsys.readouterr().out
    png, chrome = tmp_path / "t.png", tmp_path / "c.json"
    args = ["timeline", str(path), "--workers", "2", "--steps", "4", "--window", "1:2"]
    assert main([*args, "-o", str(png), "--chrome", str(chrome)]) == 0
    names = {e.get("cat") for e in json.loads(chrome.read_text())["traceEvents"]}
    assert OVERHEAD in names
