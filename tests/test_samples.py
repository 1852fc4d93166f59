"""The shipped sample traces: real profiles of the built-in models, small, and documented."""

from __future__ import annotations

from importlib import resources

import pytest

from profilers import models
from simcore.trace.io import SAMPLE_TRACE_PACKAGE, load_trace, sample_names
from simcore.trace.model import OpKind

MAX_SAMPLE_BYTES = 600_000  # keep the repository lean
REQUIRED = {"mlp", "cnn", "resnet18", "resnet50"}


def test_the_required_models_are_shipped() -> None:
    shipped = {name.rsplit("-b", 1)[0] for name in sample_names()}
    assert shipped >= REQUIRED


@pytest.mark.parametrize("name", sample_names())
def test_sample_is_a_real_profile_of_its_model(name: str) -> None:
    path = resources.files(SAMPLE_TRACE_PACKAGE).joinpath(f"{name}.json")
    assert len(path.read_bytes()) <= MAX_SAMPLE_BYTES
    trace = load_trace(name)
    md = trace.metadata
    assert name == f"{md.model_name}-b{md.batch_size}"
    assert md.framework == "torch" and md.profiled_steps == trace.n_steps >= 10
    # Parameter bytes are the built-in model's own (float32).
    assert trace.param_count == models.get_spec(md.model_name).param_count
    assert trace.param_nbytes == 4 * trace.param_count
    for i, step in enumerate(trace.steps):
        assert step.forward_s is not None and step.backward_s is not None
        assert 0 < trace.phase_time_s(i, OpKind.FORWARD) <= step.forward_s * (1 + 1e-6)
        assert 0 < trace.phase_time_s(i, OpKind.BACKWARD) <= step.backward_s * (1 + 1e-6)


def test_every_sample_is_documented() -> None:
    readme = resources.files(SAMPLE_TRACE_PACKAGE).joinpath("README.md").read_text()
    for name in sample_names():
        assert f"`{name}.json`" in readme
