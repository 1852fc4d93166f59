"""The per-layer PyTorch profiler: real dataflow DAGs, parameter bytes, timings that add up, errors.

Models are profiled at tiny inputs (a few ms a step) so the file stays fast; what is checked is
structure that does not depend on speed, plus timing invariants that hold on any machine.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
import torch
from torch import nn

from profilers import models, profile_model
from profilers.clocks import CpuClock, CudaClock, clock_for
from simcore.errors import ConfigError, ProfilingError
from simcore.trace.io import load_trace, save_trace
from simcore.trace.model import OpKind, Trace

# Per-op sums must cover at least this share of each phase's wall time; the rest is the
# interpreter's bookkeeping and autograd scheduling between ops (measured: 95-100 %).


class ResidualBlock(nn.Module):
    """conv -> (conv -> bn -> relu) + skip from the first conv -> head."""

    input_shape = (3, 8, 8)

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.conv = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU(inplace=True)
        self.head = nn.Linear(4 * 8 * 8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        stem = self.stem(x)
        y = self.relu(self.bn(self.conv(stem)))
        return self.head(torch.flatten(y + stem, 1))


class BranchingBlock(nn.Module):
    """One stem feeding three parallel branches joined by a concatenation."""

    input_shape = (3, 8, 8)

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 1)
        self.left = nn.Conv2d(4, 2, 1)
        self.middle = nn.Conv2d(4, 2, 3, padding=1)
        self.right = nn.MaxPool2d(3, stride=1, padding=1)
        self.head = nn.Linear(8 * 8 * 8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.stem(x)
        joined = torch.cat([self.left(s), self.middle(s), self.right(s)], 1)
        return self.head(torch.flatten(joined, 1))


def deps(trace: Trace, op_id: str) -> set[str]:
    return set(trace.ops[trace.op_index[op_id]].deps)


def quick(model: object, **kwargs: object) -> Trace:
    options: dict[str, object] = {"batch_size": 2, "steps": 2, "warmup": 1}
    options.update(kwargs)
    return profile_model(model, **options)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def resnet18_small() -> Trace:
    return quick("resnet18", input_shape=(3, 32, 32))


def test_residual_block_shows_branch_and_join() -> None:
    trace = quick(ResidualBlock())
    assert [layer.name for layer in trace.layers] == [
        "stem", "conv", "bn", "relu", "add", "flatten", "head", "loss",
    ]  # fmt: skip
    assert deps(trace, "forward:add") == {"forward:relu", "forward:stem"}  # the join
    assert deps(trace, "forward:conv") == {"forward:stem", "pull:conv"}
    # The fork's backward waits for the gradients of both of its consumers.
    assert deps(trace, "backward:stem") == {"backward:conv", "backward:add"}
    assert deps(trace, "backward:loss") == {"forward:loss"}
    assert deps(trace, "push:stem") == {"backward:stem"}
    assert deps(trace, "update:stem") == {"push:stem"}
    assert "pull:relu" not in trace.op_index  # parameter-free layers move no bytes


def test_branching_block_shows_parallel_branches() -> None:
    trace = quick(BranchingBlock())
    assert deps(trace, "forward:cat") == {"forward:left", "forward:middle", "forward:right"}
    for branch in ("left", "middle", "right"):
        assert "forward:stem" in deps(trace, f"forward:{branch}")
    assert deps(trace, "backward:stem") == {
        "backward:left", "backward:middle", "backward:right",
    }  # fmt: skip


def test_resnet18_residual_joins_and_parameter_bytes(resnet18_small: Trace) -> None:
    trace = resnet18_small
    adds = [layer.name for layer in trace.layers if layer.module_type == "add"]
    assert len(adds) == 8  # one per BasicBlock
    for name in adds:
        assert len(deps(trace, f"forward:{name}")) == 2
    model = models.build_model("resnet18")
    expected = {n: p.numel() * p.element_size() for n, p in model.named_parameters()}
    listed = {p.name: p.nbytes for layer in trace.layers for p in layer.params}
    assert listed == expected
    assert trace.param_nbytes == sum(expected.values()) == 4 * 11_689_512
    for layer in trace.layers:
        if layer.params:
            assert trace.ops[trace.op_index[f"pull:{layer.name}"]].nbytes == layer.param_nbytes
            assert trace.ops[trace.op_index[f"push:{layer.name}"]].nbytes == layer.param_nbytes


def test_inception_concatenates_four_branches() -> None:
    trace = quick("inception", input_shape=(3, 64, 64), steps=1, warmup=0)
    cats = [layer.name for layer in trace.layers if layer.module_type == "cat"]
    assert len(cats) == 9  # inception 3a, 3b, 4a-4e, 5a, 5b
    assert all(len(deps(trace, f"forward:{name}")) == 4 for name in cats)


def test_times_are_positive_and_add_up_to_each_phase(resnet18_small: Trace) -> None:
    trace = resnet18_small
    assert trace.n_steps == 2 and trace.metadata.warmup_steps == 1
    for i, step in enumerate(trace.steps):
        for op, duration in zip(trace.ops, step.duration_s, strict=True):
            if op.kind in (OpKind.FORWARD, OpKind.BACKWARD, OpKind.UPDATE):
                assert duration is not None and duration > 0, op.id
            elif op.kind is OpKind.OTHER:  # the step's fixed costs (tests/test_step_overhead.py)
                assert duration is not None and duration >= 0, op.id
            else:
                assert duration is None  # transfer time comes from bytes and bandwidth
        for kind, wall in (
            (OpKind.FORWARD, step.forward_s),
            (OpKind.BACKWARD, step.backward_s),
            (OpKind.UPDATE, step.update_s),
        ):
            assert wall is not None
            total = trace.phase_time_s(i, kind)
            # Ops of one phase run one after another on one thread: never more than the wall.
            # How much of the wall they cover depends on the machine's load (a preempted
            # profiler counts the gap in the wall only); what they leave is carried by the
            # step's overhead ops, exactly (tests/test_step_overhead.py).
            assert 0 < total <= wall * (1 + 1e-6) + 1e-8, kind


def test_start_times_follow_the_phases(resnet18_small: Trace) -> None:
    step = resnet18_small.steps[0]
    assert step.start_s is not None and step.forward_s is not None
    forwards = [
        (start, duration)
        for op, start, duration in zip(
            resnet18_small.ops, step.start_s, step.duration_s, strict=True
        )
        if op.kind is OpKind.FORWARD
    ]
    assert forwards[0][0] is not None and forwards[0][0] >= 0
    for (s0, d0), (s1, _) in itertools.pairwise(forwards):
        assert s0 is not None and s1 is not None and d0 is not None
        assert s1 >= s0 + d0 - 1e-8  # one after another, in trace order
    for op, start in zip(resnet18_small.ops, step.start_s, strict=True):
        if op.kind is OpKind.BACKWARD:
            assert start is not None and start >= step.forward_s - 1e-8


def test_layer_without_autograd_work_has_zero_backward() -> None:
    # The MLP's first layer flattens the input, which needs no gradient: autograd records nothing.
    trace = quick("mlp")
    first = trace.layers[0]
    assert first.module_type == "Flatten"
    index = trace.op_index[f"backward:{first.name}"]
    assert all(step.duration_s[index] == 0.0 for step in trace.steps)


def test_trace_round_trips_and_records_metadata(tmp_path: Path) -> None:
    trace = quick("cnn", batch_size=3, seed=7)
    again = load_trace(save_trace(trace, tmp_path / "cnn.json"))
    assert again.ops == trace.ops and again.layers == trace.layers and again.steps == trace.steps
    md = again.metadata
    assert (md.model_name, md.batch_size, md.device, md.dtype) == ("cnn", 3, "cpu", "float32")
    assert md.profiled_steps == 2 and md.warmup_steps == 1 and md.framework == "torch"
    assert md.profiler["timer"] == "time.perf_counter" and md.profiler["seed"] == 7
    assert md.host["torch_threads"] >= 1 and "torch" in md.library_versions


def test_same_model_gives_the_same_dag() -> None:
    a, b = quick("cnn"), quick("cnn", batch_size=5)
    assert a.ops == b.ops and a.layers == b.layers


def test_progress_is_reported_per_step() -> None:
    calls: list[tuple[int, int]] = []
    quick("mlp", steps=3, warmup=2, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(i, 5) for i in range(1, 6)]


def test_shared_module_parameters_are_listed_once() -> None:
    class Twice(nn.Module):
        input_shape = (4,)

        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(torch.relu(self.fc(x)))

    trace = quick(Twice())
    owners = [layer.name for layer in trace.layers if layer.params]
    assert owners == ["fc"]  # the first call owns the weights; the second call ("fc_1") none
    assert trace.param_nbytes == 4 * (16 + 4)


def test_clock_choice_follows_the_device() -> None:
    assert isinstance(clock_for(torch.device("cpu")), CpuClock)
    assert isinstance(clock_for(torch.device("cuda", 0)), CudaClock)  # built, not used


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_profile_uses_cuda_events() -> None:
    trace = quick("cnn", device="cuda")
    assert trace.metadata.profiler["timer"].startswith("torch.cuda.Event")
    assert math.isfinite(trace.steps[0].forward_s or math.nan)


class DataDependent(nn.Module):
    input_shape = (4,)

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:  # branches on a tensor's value: torch.fx cannot trace this
            return self.fc(x)
        return self.fc(-x)


class NotAClassifier(nn.Module):
    input_shape = (4,)

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x).sum()


@pytest.mark.parametrize(
    ("model", "kwargs", "error", "message"),
    [
        ("nope", {}, ConfigError, "unknown model 'nope'; available: mlp, cnn, resnet8, transf"),
        ("mlp", {"steps": 0}, ConfigError, "--steps: must be an integer >= 1, got 0"),
        ("mlp", {"batch_size": -2}, ConfigError, "--batch-size: must be an integer >= 1"),
        ("mlp", {"warmup": -1}, ConfigError, "--warmup: must be an integer >= 0"),
        ("mlp", {"device": "gpu7"}, ConfigError, "--device: 'gpu7' is not a device"),
        ("mlp", {"device": "meta"}, ConfigError, "--device: 'meta' is not supported"),
        (nn.Linear(4, 2), {}, ConfigError, "--input-shape: required for model 'Linear'"),
        (DataDependent(), {}, ProfilingError, "torch.fx cannot trace its forward"),
        (NotAClassifier(), {}, ProfilingError, r"output \(\) is not \(batch, classes\)"),
        ("mlp", {"input_shape": (3, 5)}, ProfilingError, "a training step failed on input 2x3x5"),
    ],
)
def test_bad_input_is_named(
    model: object, kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        quick(model, **kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without GPU")
def test_cuda_without_gpu_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="--device: 'cuda' requested, but this torch sees no"):
        quick("mlp", device="cuda")
