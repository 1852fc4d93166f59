"""A trace's recorded CPU time per step (schema version 3) and what ``simulate`` makes of it: a
parameter server's communication threads, as the validation charges them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from simcore.cli.main import main
from simcore.errors import TraceError
from simcore.network import NetworkProfile
from simcore.network_effects import TransferCpu
from simcore.network_io import save_network_profile
from simcore.trace import SCHEMA_VERSION, StepProfile, Trace, trace_from_dict, trace_to_dict
from simcore.trace.build import synthetic_trace
from simcore.trace.cpu import (
    computation_s_per_step,
    measured_comm_thread,
    measured_transfers,
    measured_worker_cores,
)
from simcore.trace.io import save_trace

from output_support import output, point

# Two layers of 1 MB; 4 + 6 ms of computation a step (forward 1 + 2, backward 1 + 2; no update).
FORWARD, BACKWARD, NBYTES = [0.001, 0.002], [0.001, 0.002], [1_000_000, 1_000_000]
COMPUTE_S = sum(FORWARD) + sum(BACKWARD)


def beside_a_server(cpu_s: list[float | None], transfer_s: float | None = 0.004) -> Trace:
    """A trace as a one-worker run beside a real parameter server gives it: measured transfers
    (``transfer_s`` each; None: derived from bytes, a solo profile) and the process's CPU time
    per step (``cpu_s``, one entry a step)."""
    base = synthetic_trace([FORWARD] * len(cpu_s), [BACKWARD] * len(cpu_s), NBYTES)
    steps = []
    for step, cpu in zip(base.steps, cpu_s, strict=True):
        durations = tuple(
            transfer_s if op.is_communication else d
            for op, d in zip(base.ops, step.duration_s, strict=True)
        )
        steps.append(StepProfile(duration_s=durations, cpu_s=cpu))
    return dataclasses.replace(base, steps=tuple(steps))


def unrecorded(tmp_path: Path) -> str:
    """A saved trace of 2 ms steps whose CPU time was not recorded (a trace of schema version
    2 or older, or a profiler that could not read it)."""
    base = synthetic_trace([FORWARD], [BACKWARD], NBYTES)
    return str(save_trace(base, tmp_path / "unrecorded.json"))


def test_the_cpu_beyond_the_computation_is_the_mean_cpu_less_the_mean_computation() -> None:
    trace = beside_a_server([0.012, 0.016])
    assert computation_s_per_step(trace) == pytest.approx(COMPUTE_S)
    measured = measured_comm_thread(trace)
    assert measured is not None
    assert measured.cpu_s_per_step == pytest.approx(0.014)
    assert measured.beyond_s == pytest.approx(0.014 - COMPUTE_S)
    # Less CPU than the replayed computation (its wall time held waits): nothing beyond it.
    assert measured_comm_thread(beside_a_server([0.005, 0.005])).beyond_s == 0.0  # type: ignore[union-attr]


def test_only_a_trace_that_ran_beside_its_transfers_and_timed_every_step_has_one() -> None:
    assert measured_comm_thread(beside_a_server([0.012, None])) is None  # one step untimed
    solo = beside_a_server([0.012, 0.012], transfer_s=None)  # `sgdsim profile`: no transfers ran
    assert not measured_transfers(solo) and measured_comm_thread(solo) is None
    assert measured_transfers(beside_a_server([None, None]))


def test_cpu_time_round_trips_as_version_3_and_older_versions_may_not_carry_it() -> None:
    trace = beside_a_server([0.012, 0.016])
    doc = trace_to_dict(trace)
    assert doc["schema_version"] == SCHEMA_VERSION == 3
    assert [s["cpu_s"] for s in doc["steps"]] == [0.012, 0.016]
    again = trace_from_dict(json.loads(json.dumps(doc)), "t.json")
    assert [s.cpu_s for s in again.steps] == [0.012, 0.016]
    untimed = trace_to_dict(beside_a_server([None, None]))
    assert "cpu_s" not in untimed["steps"][0]
    old = {**doc, "schema_version": 2}
    with pytest.raises(TraceError, match=r"old.json: steps\[0\]: field 'cpu_s' needs schema_vers"):
        trace_from_dict(old, "old.json")
    bad: dict[str, Any] = json.loads(json.dumps(doc))
    bad["steps"][1]["cpu_s"] = -0.5
    with pytest.raises(TraceError, match=r"steps\[1\].*cpu_s.*-0.5"):
        trace_from_dict(bad, "bad.json")


SIM = ["--arch", "ps", "--mode", "async", "--bandwidth", "10Gbit/s", "--steps", "60"]
SIM += ["--warmup", "10", "--replications", "1", "--seed", "3"]


def simulate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[dict[str, Any], str]:
    """The JSON point of ``sgdsim simulate argv --json`` and the text of the same run."""
    assert main(["simulate", *argv, "--json"]) == 0
    json_point = point(capsys.readouterr().out)
    assert main(["simulate", *argv]) == 0
    return json_point, capsys.readouterr().out


def test_simulate_charges_the_traces_own_threads_when_workers_share_cores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = beside_a_server([0.012, 0.016])
    path = str(save_trace(trace, tmp_path / "solo.json"))
    beyond = 0.014 - COMPUTE_S  # 8 ms
    hosted = [path, *SIM, "--workers", "3", "--colocated", "3", "--host-cores", "1"]
    auto, text = simulate(capsys, *hosted)
    given, given_text = simulate(capsys, *hosted, "--comm-thread", "8ms")
    assert auto["examples_per_s"]["value"] == given["examples_per_s"]["value"]
    assert "(measured: the trace's 14.0 ms of CPU per step less the 6.00 ms it computes)" in text
    assert "(--comm-thread)" in given_text
    assert auto["host"]["comm_thread_s_per_step"] == {
        "value": pytest.approx(beyond),
        "source": "trace",
    }
    assert given["host"]["comm_thread_s_per_step"]["source"] == "--comm-thread"
    off, off_text = simulate(capsys, *hosted, "--comm-thread", "0")
    assert "communication threads" not in off_text
    assert off["host"]["comm_thread_s_per_step"] == {"value": 0.0, "source": "--comm-thread"}
    # One core does all three workers' 6 + 8 ms of CPU a step: at most 1 / 14 ms steps/s
    # (batch 1), where without the threads the computation alone would allow 1 / 6 ms.
    assert auto["examples_per_s"]["value"] <= 1 / (COMPUTE_S + beyond) * (1 + 1e-9)
    assert off["examples_per_s"]["value"] > 1 / (COMPUTE_S + beyond)
    # A host each: the trace ran beside its transfers on one already, nothing is added.
    alone, alone_text = simulate(capsys, path, *SIM, "--workers", "3")
    assert "communication threads" not in alone_text
    assert alone["host"]["comm_thread_s_per_step"] == {"value": 0.0, "source": "default"}
    # A ring has no parameter-server threads to charge.
    _, ring_text = simulate(
        capsys,
        path,
        *SIM[4:],
        "--arch",
        "allreduce",
        "--workers",
        "3",
        "--colocated",
        "3",
        "--host-cores",
        "1",
    )
    assert "communication threads" not in ring_text


def test_the_threads_stand_in_for_a_profiles_transfer_cpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(save_trace(beside_a_server([0.012, 0.016]), tmp_path / "solo.json"))
    profile = NetworkProfile(
        latency_s=0.0, bandwidth_bps=1e9, transfer_cpu=TransferCpu(20e-9, host_cpu_cores=1)
    )
    network = str(save_network_profile(profile, tmp_path / "net.json"))
    hosted = [path, *SIM, "--workers", "2", "--colocated", "2", "--host-cores", "1"]
    with_profile, text = simulate(capsys, *hosted, "--network", network)
    assert f"transfer CPU 20 ns/B ({network}) not used: the communication threads'" in text
    plain, _ = simulate(capsys, *hosted)
    assert with_profile["examples_per_s"]["value"] == plain["examples_per_s"]["value"]
    # --comm-cpu asks for the per-byte model instead: the trace's threads step aside.
    per_byte, per_byte_text = simulate(capsys, *hosted, "--network", network, "--comm-cpu", "20")
    assert "communication threads" not in per_byte_text
    assert per_byte["examples_per_s"]["value"] != plain["examples_per_s"]["value"]


def test_trace_show_lists_the_cpu_time_and_what_lies_beyond_the_computation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(save_trace(beside_a_server([0.012, 0.016]), tmp_path / "solo.json"))
    assert main(["trace", "show", path]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "cpu (measured)" in x]
    assert "14.00 ms" in line and "[12.00 .. 16.00]" in line
    assert "8.00 ms beyond the computation" in line
    solo = str(save_trace(beside_a_server([0.012, 0.016], None), tmp_path / "profiled.json"))
    assert main(["trace", "show", solo]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "cpu (measured)" in x]
    assert "beyond" not in line  # no transfers ran beside it: nothing to charge
    assert main(["trace", "show", unrecorded(tmp_path)]) == 0
    assert "cpu (measured)" not in capsys.readouterr().out  # not recorded


def test_timeline_charges_them_alike(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(save_trace(beside_a_server([0.012, 0.016]), tmp_path / "solo.json"))
    chrome = str(tmp_path / "timeline.json")
    argv = ["timeline", path, "--arch", "ps", "--bandwidth", "10Gbit/s", "--steps", "20"]
    argv += ["--workers", "2", "--colocated", "2", "--host-cores", "1"]
    assert main([*argv, "--chrome", chrome, "--json"]) == 0
    (only,) = json.loads(capsys.readouterr().out)["points"]
    assert only["host"]["comm_thread_s_per_step"] == {
        "value": pytest.approx(0.008),
        "source": "trace",
    }


def test_a_trace_made_beside_its_transfers_gets_no_transfer_cpu_on_top(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No CPU time recorded (a run from before version 3): no threads to charge, yet its
    # computation already ran beside its transfers, which a profile's per-byte cost models.
    path = str(save_trace(beside_a_server([None, None]), tmp_path / "solo.json"))
    profile = NetworkProfile(
        latency_s=0.0, bandwidth_bps=1e9, transfer_cpu=TransferCpu(20e-9, host_cpu_cores=1)
    )
    network = str(save_network_profile(profile, tmp_path / "net.json"))
    hosted = [path, *SIM, "--workers", "2", "--colocated", "2", "--host-cores", "1"]
    with_profile, text = simulate(capsys, *hosted, "--network", network)
    assert "not used: the trace's computation ran beside its transfers" in text
    assert with_profile["link"]["comm_cpu_s_per_byte"]["used"] is False
    without, _ = simulate(capsys, *hosted, "--network", network, "--comm-cpu", "0")
    assert with_profile["examples_per_s"]["value"] == without["examples_per_s"]["value"]
    # A profile of the computation alone (`sgdsim profile`: no transfers measured) gets it.
    solo = str(save_trace(beside_a_server([None, None], None), tmp_path / "profiled.json"))
    alone, alone_text = simulate(capsys, solo, *hosted[1:], "--network", network)
    assert alone["link"]["comm_cpu_s_per_byte"]["used"] is True
    assert "transfer CPU 20 ns/B" in alone_text and "not used" not in alone_text


def profiled(cpu_s: float | None, wall_s: float = 0.010, steps: int = 2) -> Trace:
    """A trace of the computation alone (no transfers measured) whose steps took ``wall_s``
    and ``cpu_s`` of the process's CPU time."""
    base = synthetic_trace([FORWARD] * steps, [BACKWARD] * steps, NBYTES)
    return dataclasses.replace(
        base,
        steps=tuple(dataclasses.replace(s, wall_s=wall_s, cpu_s=cpu_s) for s in base.steps),
    )


def test_the_cores_a_profiled_computation_held_are_its_cpu_over_its_wall_time() -> None:
    assert measured_worker_cores(profiled(0.020)) == pytest.approx(2.0)
    assert measured_worker_cores(profiled(0.010)) == pytest.approx(1.0)
    assert measured_worker_cores(profiled(None)) is None  # not recorded
    # Beside a server the CPU time holds the communication threads too: no cores from it.
    assert measured_worker_cores(beside_a_server([0.012, 0.016])) is None


def test_simulate_takes_the_worker_cores_from_the_trace_unless_told(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One thread's profile (CPU = wall), two workers on a host of two cores: each has a core
    # of its own, so neither slows down; the old default (a worker held the whole host)
    # would halve both.
    one_thread = str(save_trace(profiled(0.010), tmp_path / "one.json"))
    ring = ["--arch", "allreduce", "--bandwidth", "1Tbit/s", "--steps", "60", "--warmup", "10"]
    ring += ["--replications", "1", "--workers", "2", "--colocated", "2", "--host-cores", "2"]
    measured, text = simulate(capsys, one_thread, *ring)
    assert measured["host"]["worker_cpu_cores"] == {"value": 1.0, "source": "trace"}
    assert "holds 1 cores (measured: the trace's CPU time over its wall time)" in text
    whole, whole_text = simulate(capsys, one_thread, *ring, "--worker-cores", "2")
    assert whole["host"]["worker_cpu_cores"] == {"value": 2.0, "source": "--worker-cores"}
    assert "(--worker-cores)" in whole_text
    rate = measured["examples_per_s"]["value"]
    assert whole["examples_per_s"]["value"] == pytest.approx(rate / 2, rel=0.05)
    # Alone on a host, W = 1: the profiled step whatever the cores.
    alone, _ = simulate(capsys, one_thread, *ring[:-6], "--workers", "1")
    assert alone["host"]["worker_cpu_cores"] == {"value": None, "source": "default"}
    # A profile that held more cores than the host has: capped at the host's.
    wide = str(save_trace(profiled(0.080), tmp_path / "wide.json"))
    capped, _ = simulate(capsys, wide, *ring)
    assert capped["host"]["worker_cpu_cores"]["value"] == 2.0


def test_the_profiler_records_each_steps_cpu_time_on_cpu() -> None:
    import torch

    from profilers import profile_model

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread computes: the process holds one core, no more
    try:
        trace = profile_model("cnn", batch_size=8, steps=5, warmup=1)
    finally:
        torch.set_num_threads(threads)
    assert trace.schema_version == SCHEMA_VERSION
    assert all(step.cpu_s is not None and step.cpu_s > 0 for step in trace.steps)
    cores = measured_worker_cores(trace)
    # One thread holds one core at most (a busy machine lowers it, never raises it).
    assert cores is not None and 0 < cores < 1.05


def test_a_sweep_says_how_its_workers_are_hosted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one_thread = str(save_trace(profiled(0.010), tmp_path / "one.json"))
    argv = [one_thread, "--arch", "allreduce", "--bandwidth", "1Tbit/s", "--steps", "30"]
    argv += ["--warmup", "5", "--replications", "1", "--workers", "1-3", "--colocated", "3"]
    assert main(["simulate", *argv, "--host-cores", "2"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("hosts")]
    assert "sharing 2 CPU cores; one worker's computation holds 1 cores (measured" in line


def test_trace_show_json_carries_what_the_cpu_time_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    beside = str(save_trace(beside_a_server([0.012, 0.016]), tmp_path / "solo.json"))
    assert main(["trace", "show", beside, "--json"]) == 0
    cpu = output(capsys.readouterr().out)["context"]["cpu"]
    assert cpu["cpu_s"]["mean"] == pytest.approx(0.014)
    assert cpu["worker_cores"] is None
    assert cpu["comm_thread_s_per_step"] == pytest.approx(0.008)
    one = str(save_trace(profiled(0.020), tmp_path / "two.json"))
    assert main(["trace", "show", one, "--json"]) == 0
    cpu = output(capsys.readouterr().out)["context"]["cpu"]
    assert cpu["worker_cores"] == pytest.approx(2.0) and cpu["comm_thread_s_per_step"] is None
    assert main(["trace", "show", unrecorded(tmp_path), "--json"]) == 0
    cpu = output(capsys.readouterr().out)["context"]["cpu"]
    assert cpu == {"cpu_s": None, "worker_cores": None, "comm_thread_s_per_step": None}
