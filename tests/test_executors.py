"""Executors: a sweep's simulations on this machine's processes, a local Dask cluster or a
local Ray give the same results bit for bit, tell each result as it finishes, and say in one
line what is missing. The Dask and Ray tests skip cleanly without their extras."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simcore.cli.main import main
from simcore.errors import ConfigError
from simcore.executors import run_on
from simcore.sim import SimulationConfig
from simcore.sim.precision import simulate_point
from simcore.trace.model import Trace

from trace_support import tiny_trace


def items() -> list[tuple[list[Trace], SimulationConfig, None]]:
    trace = tiny_trace()
    return [
        (
            [trace],
            SimulationConfig(
                workers=w, bandwidth_bps=bps, steps=40, warmup_steps=5, seed=3, mode=mode
            ),
            None,
        )
        for w in (1, 3)
        for bps in (2e8, 1e9)
        for mode in ("async", "sync")
    ]


def rates(results: list) -> list[float]:  # type: ignore[type-arg]
    return [r.examples_per_s.value for r in results]


def local_rates() -> list[float]:
    return rates(run_on("local", simulate_point, items()))


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["dask", "ray"])
def test_a_cluster_gives_the_local_results_bit_for_bit(executor: str) -> None:
    pytest.importorskip("distributed" if executor == "dask" else "ray")
    from simcore.parallel import jobs

    told: list[int] = []
    progress: list[tuple[int, int]] = []
    with jobs(2):
        results = run_on(
            executor,
            simulate_point,
            items(),
            planned=[10] * 8,
            progress=lambda d, t: progress.append((d, t)),
            finished=lambda i, _: told.append(i),
        )
    assert rates(results) == local_rates()
    assert sorted(told) == list(range(8))  # each told once, as it finished
    assert progress[-1] == (80, 80) and all(t == 80 for _, t in progress)


@pytest.mark.slow
def test_sgdsim_run_on_dask_writes_what_the_local_run_writes(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    from simcore.trace.io import save_trace

    trace = save_trace(tiny_trace(), tmp_path / "tiny.json")
    experiment = tmp_path / "exp.toml"
    experiment.write_text(
        f'[workload]\ntrace = "{trace}"\n[cluster]\nworkers = [1, 2, 4]\n'
        '[network]\nbandwidth = "500Mbps"\n[run]\nsteps = 30\n'
    )

    def values(out: Path) -> dict[int, float]:
        lines = out.read_text().splitlines()[1:]
        return {r["point"]: r["examples_per_s"]["value"] for r in map(json.loads, lines)}

    local, dask = tmp_path / "local.jsonl", tmp_path / "dask.jsonl"
    assert main(["run", str(experiment), "--out", str(local), "--quiet"]) == 0
    argv = ["run", str(experiment), "--out", str(dask), "--executor", "dask", "--jobs", "2"]
    assert main([*argv, "--quiet"]) == 0
    assert values(local) == values(dask) and len(values(local)) == 3


def test_an_address_is_for_a_cluster_and_an_unknown_executor_is_named() -> None:
    with pytest.raises(ConfigError, match="--address: only with --executor dask or ray"):
        run_on("local", simulate_point, items(), address="tcp://x:8786")
    with pytest.raises(ConfigError, match="--executor spark: expected one of local, dask, ray"):
        run_on("spark", simulate_point, items())


def test_a_missing_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_ray(name: str, *args: object, **kwargs: object) -> object:
        if name == "ray" or name.startswith("ray."):
            raise ImportError("no ray here")
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_ray)
    monkeypatch.delitem(__import__("sys").modules, "ray", raising=False)
    with pytest.raises(ConfigError, match=r"ray is not installed; pip install 'sgdsim\[ray\]'"):
        run_on("ray", simulate_point, items())
