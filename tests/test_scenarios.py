"""Every scenario script runs, at small settings, the way a user runs it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
SMALL = ["--trace", "cnn-b32", "--workers", "1,2,3", "--steps", "30", "--warmup", "5", "--quiet"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, SCENARIOS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


def test_throughput_vs_workers_prints_tables_and_saves_the_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = load("throughput_vs_workers")
    assert scenario.main([*SMALL, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for label, _, _ in scenario.POLICIES:
        assert label in out
    assert "best: " in out
    assert (tmp_path / scenario.FIGURE).read_bytes().startswith(PNG_MAGIC)
    # A second run must not replace the figure silently.
    assert scenario.main([*SMALL, "--out", str(tmp_path)]) == 2
    assert "already exists; pass --force" in capsys.readouterr().err


def test_one_worker_is_the_same_under_every_policy(tmp_path: Path) -> None:
    # One worker shares nothing and waits for nobody: sync = async and fcfs = ps, exactly.
    scenario = load("throughput_vs_workers")
    curves, _ = scenario.run(scenario.parse_args([*SMALL, "--out", str(tmp_path)]))
    at_one = {c.points[0].examples_per_s.value for c in curves}
    assert len(at_one) == 1
    for curve in curves:  # more workers never lower the job's throughput on these settings
        assert curve.examples_per_s == sorted(curve.examples_per_s)


def test_saturated_curves_sit_at_the_link_bounds(tmp_path: Path) -> None:
    """On a slow link every worker-step moves the whole model down and its gradients up.

    Each direction carries at most B / (8 * model bytes) worker-steps per second, so no policy
    exceeds that. Sync-SGD with processor sharing cannot overlap pulls with pushes across the
    barrier, and once saturated sits at half of it. (Async-SGD reaches the bound only when its
    workers spread out; with computation this short they travel in convoys, pulling together and
    pushing together, and stay well below it.)
    """
    from simcore.network import NetworkProfile
    from simcore.network_io import save_network_profile
    from simcore.trace.io import load_trace

    bandwidth_bps = 100e6
    network = save_network_profile(
        NetworkProfile(latency_s=0.0, bandwidth_bps=bandwidth_bps), tmp_path / "slow.json"
    )
    scenario = load("throughput_vs_workers")
    args = [*SMALL, "--workers", "1,8", "--steps", "60", "--network", str(network)]
    curves, _ = scenario.run(scenario.parse_args(args))
    link_bound = bandwidth_bps / (8 * load_trace("cnn-b32").param_nbytes)  # steps/s
    by_label = {c.label: c.points[-1].steps_per_s.value for c in curves}
    async_ps = by_label["Async-SGD, processor sharing"]
    sync_ps = by_label["Sync-SGD, processor sharing"]
    assert sync_ps <= async_ps <= 1.01 * link_bound
    assert 0.90 * link_bound / 2 <= sync_ps <= 1.01 * link_bound / 2


def point(workers: int, value: float) -> SimpleNamespace:
    return SimpleNamespace(
        config=SimpleNamespace(workers=workers), examples_per_s=SimpleNamespace(value=value)
    )


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([10, 19, 30, 31, 31.5], 3),  # 30 >= 0.95 * 31.5
        ([10, 20, 30, 40], None),  # still climbing at the last W
        ([10], 1),
        ([10, 12, 11], 2),
    ],
)
def test_saturation_point(values: list[float], expected: int | None) -> None:
    scenario = load("throughput_vs_workers")
    curve = scenario.PolicyCurve("x", tuple(point(w + 1, v) for w, v in enumerate(values)))
    assert scenario.saturation_workers(curve) == expected


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(SCENARIOS / "throughput_vs_workers.py"), "--trace", "nope"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("throughput_vs_workers: error: nope: no such file")
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "results").exists()
