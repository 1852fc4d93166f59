"""The profiler's scripts run as users run them: sample regeneration and the overhead benchmark."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from profilers import samples
from simcore.trace.io import load_trace


def test_samples_script_writes_and_protects_samples(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert samples.main(["--only", "mlp-b64", "--out", str(tmp_path)]) == 0
    trace = load_trace(tmp_path / "mlp-b64.json")
    assert trace.metadata.batch_size == 64 and trace.n_steps == samples.STEPS
    assert samples.main(["--only", "mlp-b64", "--out", str(tmp_path)]) == 2
    assert "already exists; pass --force" in capsys.readouterr().err


def test_overhead_benchmark_prints_a_row_per_model(capsys: pytest.CaptureFixture[str]) -> None:
    path = Path(__file__).with_name("bench_profiler.py")
    spec = importlib.util.spec_from_file_location("bench_profiler", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["bench_profiler"] = bench
    spec.loader.exec_module(bench)
    assert bench.main(["--models", "mlp,cnn", "--steps", "2", "--warmup", "1"]) == 0
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [row.split()[0] for row in rows] == ["mlp", "cnn"]
    assert all(row.rstrip().endswith("us") for row in rows)
