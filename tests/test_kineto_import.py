"""Importing torch.profiler (Kineto) traces: ``sgdsim trace import-kineto``.

Real traces are recorded here, inside the test, with torch.profiler on the built-in models (CPU),
and compared with ``sgdsim profile`` of the same model: the same layers, parameters and (with the
model given) the same DAG; durations close. A small hand-made trace with CUDA kernels, written
after Kineto's documented event schema (``cpu_op`` / ``cuda_runtime`` launches and ``kernel``
events sharing a ``correlation`` id, autograd nodes carrying their forward op's
``Sequence number``), checks the GPU path with numbers computed by hand.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from profilers import models
from profilers.kineto import import_kineto, kineto_trace
from profilers.layer_profiler import profile_model
from simcore.cli.main import main
from simcore.errors import TraceError
from simcore.trace.io import load_trace
from simcore.trace.model import OpKind, Trace

pytestmark = pytest.mark.slow  # records real torch.profiler traces

BATCH = 8
ACTIVE_STEPS = 5
WARMUP = 3


def record(
    name: str,
    path: Path,
    *,
    train: bool = True,
    stack: bool = True,
    shapes: bool = True,
    loss: nn.Module | None = None,
) -> Path:
    """A torch.profiler trace of ``ACTIVE_STEPS`` SGD steps of a built-in model, as a user
    records one (a schedule, prof.step() after every step, export_chrome_trace)."""
    torch.manual_seed(0)
    spec = models.get_spec(name)
    model = models.build_model(name, None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    inputs = torch.randn(BATCH, *spec.input_shape)
    labels = torch.randint(0, spec.num_classes or 1000, (BATCH,))
    # wait: the first steps of a fresh model are slow (allocations, kernel selection)
    schedule = torch.profiler.schedule(wait=WARMUP, warmup=1, active=ACTIVE_STEPS, repeat=1)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=schedule,
        record_shapes=shapes,
        with_modules=True,
        with_stack=stack,
    ) as prof:
        for _ in range(WARMUP + 1 + ACTIVE_STEPS):
            if train:
                optimizer.zero_grad()
                criterion = loss or nn.functional.cross_entropy
                criterion(model(inputs), labels).backward()
                optimizer.step()
            else:
                with torch.no_grad():
                    model(inputs)
            prof.step()
    prof.export_chrome_trace(str(path))
    return path


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("kineto")
    return {
        name: record(name, folder / f"{name}.json") for name in ("cnn", "transformer", "resnet8")
    }


@pytest.fixture(scope="module")
def profiled() -> dict[str, Trace]:
    return {
        name: profile_model(name, batch_size=BATCH, steps=ACTIVE_STEPS, warmup=WARMUP + 1)
        for name in ("cnn", "transformer", "resnet8")
    }


def fastest_phase(trace: Trace, kind: OpKind) -> float:
    """The phase's minimum over the steps: other processes only ever add time to a step, so
    the fastest is the least disturbed (the usual estimator of a timing on a shared machine)."""
    return min(trace.phase_time_s(i, kind) for i in range(trace.n_steps))


@pytest.mark.parametrize("name", ["cnn", "transformer", "resnet8"])
def test_the_model_given_gives_the_profilers_layers_bytes_and_dag(
    name: str, recorded: dict[str, Path], profiled: dict[str, Trace]
) -> None:
    imported = import_kineto(recorded[name], model=name)
    reference = profiled[name]
    assert [layer.name for layer in imported.layers] == [layer.name for layer in reference.layers]
    assert [layer.params for layer in imported.layers] == [
        layer.params for layer in reference.layers
    ]
    # the same step DAG, op for op: the simulator sees the same model
    assert [(op.id, op.kind, op.resource, op.nbytes, op.deps) for op in imported.ops] == [
        (op.id, op.kind, op.resource, op.nbytes, op.deps) for op in reference.ops
    ]
    assert imported.n_steps == ACTIVE_STEPS
    assert imported.metadata.batch_size == BATCH
    assert imported.metadata.model_name == name


@pytest.mark.parametrize("name", ["cnn", "transformer", "resnet8"])
def test_without_the_model_the_trace_alone_gives_the_same_layers_and_bytes(
    name: str, recorded: dict[str, Path], profiled: dict[str, Trace]
) -> None:
    imported = import_kineto(recorded[name])
    reference = profiled[name]
    assert len(imported.layers) == len(reference.layers)
    # module layers keep their class; names are Kineto's (Conv2d_0), the loss is "loss"
    for ours, theirs in zip(imported.layers, reference.layers, strict=True):
        assert ours.param_nbytes == theirs.param_nbytes, (ours.name, theirs.name)
        assert sorted(p.shape for p in ours.params) == sorted(p.shape for p in theirs.params)
    assert imported.layers[-1].name == "loss"
    assert imported.param_nbytes == reference.param_nbytes
    # the executed order as a chain: every forward after the one before it
    forwards = imported.ops_of_kind(OpKind.FORWARD)
    for before, after in itertools.pairwise(forwards):
        assert before.id in after.deps
    assert "executed order" in imported.metadata.profiler["dag_source"]


@pytest.mark.parametrize("name", ["cnn", "transformer", "resnet8"])
def test_durations_are_close_to_the_profilers_and_cover_the_step(
    name: str, recorded: dict[str, Path], profiled: dict[str, Trace]
) -> None:
    imported = import_kineto(recorded[name], model=name)
    reference = profiled[name]
    # Two runs of a small model on a CPU that CI shares, one under torch.profiler (which records
    # every op's shapes): measured here 0.7-2.8x per phase, single ops 2-10x apart from run to
    # run, one step in ten 5-20x slower while CI runs beside. So the phases' fastest steps
    # are compared, for their scale only (a unit
    # or a step boundary wrong is 1000x or 3x in every phase, at once) ...
    for kind in (OpKind.FORWARD, OpKind.BACKWARD, OpKind.UPDATE):
        ratio = fastest_phase(imported, kind) / fastest_phase(reference, kind)
        assert 0.1 < ratio < 10, (kind, ratio)
    # ... and the attribution exactly: every autograd node of a step lands in one layer's backward
    events = [
        e for e in json.loads(recorded[name].read_text())["traceEvents"] if e.get("ph") == "X"
    ]
    steps = sorted(
        (e for e in events if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"]
    )
    for step, profile in zip(steps, imported.steps, strict=True):
        nodes = sorted(
            (
                e
                for e in events
                if e["name"].startswith("autograd::engine::evaluate_function: ")
                and step["ts"] <= e["ts"] <= step["ts"] + step["dur"]
            ),
            key=lambda e: (e["ts"], -e["dur"]),
        )
        outermost, end = [], -1.0
        for e in nodes:
            if e["ts"] + e["dur"] > end:
                outermost.append(e)
                end = e["ts"] + e["dur"]
        backward = sum(
            d or 0.0 for op, d in zip(imported.ops, profile.duration_s, strict=True)
            if op.kind is OpKind.BACKWARD
        )  # fmt: skip
        assert backward == pytest.approx(sum(e["dur"] for e in outermost) * 1e-6, abs=1e-8)
    for step in imported.steps:
        total = sum(d or 0.0 for d in step.duration_s)
        assert step.wall_s is not None
        assert total == pytest.approx(step.wall_s, abs=1e-8)  # the fixed costs close the wall
    # every layer with parameters has a backward: the autograd nodes were attributed
    index = imported.op_index
    for layer in imported.layers:
        if layer.params:
            assert imported.steps[0].duration_s[index[f"backward:{layer.name}"]] > 0, layer.name


def test_a_loss_module_is_the_loss_layer(tmp_path: Path, profiled: dict[str, Trace]) -> None:
    """nn.CrossEntropyLoss() is a module call of its own after the model's: still the loss."""
    path = record("cnn", tmp_path / "module-loss.json", loss=nn.CrossEntropyLoss())
    alone, with_model = import_kineto(path), import_kineto(path, model="cnn")
    assert alone.layers[-1].name == "loss" and alone.layers[-1].module_type == "CrossEntropyLoss"
    assert [layer.name for layer in with_model.layers] == [
        layer.name for layer in profiled["cnn"].layers
    ]


def test_the_cli_writes_a_trace_the_simulator_runs(
    recorded: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cnn.json.gz"
    assert (
        main(["trace", "import-kineto", str(recorded["cnn"]), "-o", str(out), "--model", "cnn"])
        == 0
    )
    assert "14 layers" in capsys.readouterr().out
    trace = load_trace(out)
    assert trace.metadata.profiler["name"] == "sgdsim.profilers.kineto"
    assert main(["simulate", str(out), "--workers", "2", "--steps", "20", "--warmup", "2"]) == 0


def one_line_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and err.count("\n") == 1, err
    return err


def test_what_cannot_be_recovered_is_one_line_each(
    tmp_path: Path, recorded: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "out.json")
    inference = record("cnn", tmp_path / "inference.json", train=False)
    assert "inference-only" in one_line_error(
        ["trace", "import-kineto", str(inference), "-o", out], capsys
    )
    no_stack = record("cnn", tmp_path / "nostack.json", stack=False)
    assert "with_stack=True" in one_line_error(
        ["trace", "import-kineto", str(no_stack), "-o", out], capsys
    )
    no_shapes = record("cnn", tmp_path / "noshapes.json", shapes=False)
    assert "record_shapes=True" in one_line_error(
        ["trace", "import-kineto", str(no_shapes), "-o", out], capsys
    )
    # without shapes, the model gives the parameters (and the batch size is asked for)
    assert main(["trace", "import-kineto", str(no_shapes), "-o", out, "--model", "cnn",
                 "--batch-size", "8"]) == 0  # fmt: skip
    capsys.readouterr()
    Path(out).unlink()
    no_steps = tmp_path / "nosteps.json"
    doc = json.loads(recorded["cnn"].read_text())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if "ProfilerStep" not in e.get("name", "")]
    no_steps.write_text(json.dumps(doc))
    assert "ProfilerStep#N" in one_line_error(
        ["trace", "import-kineto", str(no_steps), "-o", out], capsys
    )
    truncated = tmp_path / "truncated.json"
    truncated.write_bytes(recorded["cnn"].read_bytes()[:20_000])
    assert "truncated" in one_line_error(
        ["trace", "import-kineto", str(truncated), "-o", out], capsys
    )
    assert "is it the model that was profiled" in one_line_error(
        ["trace", "import-kineto", str(recorded["cnn"]), "-o", out, "--model", "resnet8"], capsys
    )
    assert not Path(out).exists()  # no half-written output


# -- a hand-made GPU trace ------------------------------------------------------------------------

MAIN, BWD_THREAD = 100, 200  # CPU threads: the forward's, autograd's device thread


class GpuTraceBuilder:
    """Events after Kineto's schema: CPU ops, their cudaLaunchKernel with a correlation id, the
    kernel on stream 7 of device 0 with the same id."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.correlation = 1000

    def span(
        self, cat: str, name: str, ts: float, dur: float, tid: int = MAIN, **args: Any
    ) -> None:
        self.events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": 1,
                "tid": tid,
                "ts": ts,
                "dur": dur,
                "args": args,
            }
        )

    def launch(self, ts: float, kernel_us: float, tid: int = MAIN, kernel: str = "gemm") -> None:
        self.correlation += 1
        self.span("cuda_runtime", "cudaLaunchKernel", ts, 1.0, tid, correlation=self.correlation)
        self.events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": kernel,
                "pid": 0,
                "tid": 7,
                "ts": ts + 50,
                "dur": kernel_us,
                "args": {"correlation": self.correlation, "stream": 7, "device": 0},
            }
        )


def gpu_doc() -> dict[str, Any]:
    """One step: Net_0 runs Linear_0 (4x8 weight + bias) and ReLU_0, then the loss; backward on
    autograd's thread; one NCCL kernel that is not a layer's; the optimizer's step."""
    b = GpuTraceBuilder()
    b.span("user_annotation", "ProfilerStep#7", 0, 1000)
    b.span("python_function", "nn.Module: Net_0", 10, 300)
    b.span("python_function", "nn.Module: Linear_0", 20, 100)
    b.span(
        "cpu_op",
        "aten::linear",
        25,
        90,
        **{"Sequence number": 50, "Input Dims": [[16, 8], [4, 8], [4]]},
    )
    b.launch(30, 40.0)
    b.launch(60, 5.0)
    b.span("python_function", "nn.Module: ReLU_0", 150, 50)
    b.span("cpu_op", "aten::relu", 155, 40, **{"Sequence number": 51})
    b.launch(160, 3.0, kernel="relu")
    b.span("cpu_op", "aten::cross_entropy_loss", 320, 30, **{"Sequence number": 52})
    b.launch(325, 2.0, kernel="loss")
    prefix = "autograd::engine::evaluate_function: "
    b.span("cpu_op", prefix + "NllLossBackward0", 400, 20, BWD_THREAD, **{"Sequence number": 52})
    b.launch(405, 4.0, BWD_THREAD)
    b.span("cpu_op", prefix + "ReluBackward0", 430, 20, BWD_THREAD, **{"Sequence number": 51})
    b.launch(435, 6.0, BWD_THREAD)
    b.span("cpu_op", prefix + "AddmmBackward0", 460, 40, BWD_THREAD, **{"Sequence number": 50})
    b.launch(465, 70.0, BWD_THREAD)
    b.span("cpu_op", prefix + "torch::autograd::AccumulateGrad", 510, 10, BWD_THREAD)
    b.span("cpu_op", "torch::autograd::AccumulateGrad", 511, 8, BWD_THREAD,
           **{"Input Dims": [[4]], "Input type": ["float"]})  # fmt: skip
    b.span("cpu_op", prefix + "torch::autograd::AccumulateGrad", 530, 10, BWD_THREAD)
    b.span("cpu_op", "torch::autograd::AccumulateGrad", 531, 8, BWD_THREAD,
           **{"Input Dims": [[4, 8]], "Input type": ["c10::Half"]})  # fmt: skip
    b.launch(532, 1.0, BWD_THREAD, kernel="add")
    b.launch(600, 500.0, kernel="ncclDevKernel_AllReduce_Sum_f32_RING_LL")  # communication
    b.span("user_annotation", "Optimizer.step#SGD.step", 800, 100)
    b.launch(810, 12.0, kernel="multi_tensor_apply")
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}],
            "traceEvents": b.events}  # fmt: skip


def test_gpu_layers_take_their_kernels_time_through_correlation_ids() -> None:
    trace = kineto_trace(gpu_doc(), source="gpu.json")
    assert [layer.name for layer in trace.layers] == ["Linear_0", "ReLU_0", "loss"]
    assert trace.metadata.device == "cuda (NVIDIA H100)"
    assert trace.metadata.batch_size == 16
    (linear, relu, loss) = trace.layers
    assert sorted(p.nbytes for p in linear.params) == [4 * 4, 4 * 8 * 2]  # float bias, half weight
    assert relu.params == () and loss.params == ()
    step = trace.steps[0]
    got = {op.id: d for op, d in zip(trace.ops, step.duration_s, strict=True)}
    us = 1e-6
    assert got["forward:Linear_0"] == pytest.approx(45 * us)  # its two kernels, not its 100 us
    assert got["forward:ReLU_0"] == pytest.approx(3 * us)
    assert got["forward:loss"] == pytest.approx(2 * us)
    assert got["backward:loss"] == pytest.approx(4 * us)
    assert got["backward:ReLU_0"] == pytest.approx(6 * us)
    # AddmmBackward0 and the two AccumulateGrad nodes after it; the NCCL kernel is no layer's
    assert got["backward:Linear_0"] == pytest.approx(71 * us)
    assert got["update:Linear_0"] == pytest.approx(12 * us)  # the only layer with parameters
    assert step.wall_s == pytest.approx(1000 * us)
    assert sum(d or 0.0 for d in step.duration_s) == pytest.approx(1000 * us)


def test_a_trace_whose_steps_ran_other_layers_is_refused() -> None:
    doc = gpu_doc()
    second = [dict(e, ts=e["ts"] + 2000) for e in doc["traceEvents"]]
    for e in second:
        if e["name"] == "ProfilerStep#7":
            e["name"] = "ProfilerStep#8"
        if e["name"] == "nn.Module: ReLU_0":
            e["name"] = "nn.Module: GELU_0"
    doc["traceEvents"] += second
    with pytest.raises(TraceError, match="ProfilerStep#8 ran other layers"):
        kineto_trace(doc, source="two.json")


def test_a_ddp_trace_leaves_its_communication_to_the_simulator(
    tmp_path: Path, profiled: dict[str, Trace]
) -> None:
    """A DDP job's trace (gloo, one rank): the reducer's AllReduces, started from autograd
    hooks inside the backward, are neither a layer's time nor a fixed cost."""
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    try:
        torch.manual_seed(0)
        model = nn.parallel.DistributedDataParallel(models.build_model("cnn", None))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        inputs, labels = torch.randn(BATCH, 3, 32, 32), torch.randint(0, 10, (BATCH,))
        schedule = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
        with torch.profiler.profile(
            schedule=schedule, record_shapes=True, with_stack=True, with_modules=True
        ) as prof:
            for _ in range(4):
                optimizer.zero_grad()
                nn.functional.cross_entropy(model(inputs), labels).backward()
                optimizer.step()
                prof.step()
        prof.export_chrome_trace(str(tmp_path / "ddp.json"))
    finally:
        dist.destroy_process_group()
    imported = import_kineto(tmp_path / "ddp.json", model="cnn")
    reference = profiled["cnn"]
    assert [layer.params for layer in imported.layers] == [
        layer.params for layer in reference.layers
    ]
    assert import_kineto(tmp_path / "ddp.json").metadata.model_name == "SmallCNN"  # not the wrapper
    communication = imported.metadata.profiler["communication_s"]
    assert len(communication) == 2 and all(c > 0 for c in communication)
    for step, comm in zip(imported.steps, communication, strict=True):
        assert step.wall_s is not None
        assert sum(d or 0.0 for d in step.duration_s) == pytest.approx(step.wall_s - comm, abs=1e-8)
