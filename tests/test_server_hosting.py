"""Parameter servers on a training host (issue 47): their updates share the host's cores with its
workers' computation (``host_cpu_cores``), and their transfers with that host's workers stay on
the machine (``server_nic="shared"``) or cross the servers' own link (``"own"``). Steps timed by
hand under processor sharing of the cores; the settings' checks; the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from simcore.cli.main import main
from simcore.errors import ConfigError
from simcore.sim import SimulationConfig, simulate
from simcore.trace.build import synthetic_trace
from simcore.trace.io import load_trace, save_trace
from simcore.trace.model import Trace

from output_support import point

REL = 1e-9
B = 1e9  # bit/s: a layer of 625 kB moves in 5 ms alone
LAYER_BYTES = 625_000
P = 8 * LAYER_BYTES / B  # 0.005 s


def two_layers() -> Trace:
    """l0 then l1; backward l1, then l1's push and update beside backward l0 (whose push and
    update end the step). Compute 0.010 + 0.020 forward, 0.030 + 0.020 backward; updates l0
    0.005, l1 0.010: 0.095 s of computation per step in all."""
    return synthetic_trace(
        [0.010, 0.020], [0.020, 0.030], [LAYER_BYTES] * 2, update_s=[0.005, 0.010]
    )


def one_layer() -> Trace:
    """Forward 0.010, backward 0.020, update 0.012: 0.042 s of computation per step."""
    return synthetic_trace([0.010], [0.020], [LAYER_BYTES], update_s=0.012)


def step_s(trace: Trace, **kw: object) -> float:
    """Seconds per step of each worker in lock-step (Sync-SGD, one profiled step: periodic)."""
    base: dict[str, object] = {"steps": 6, "warmup_steps": 1, "mode": "sync", "bandwidth_bps": B}
    base.update(kw)
    config = SimulationConfig(**base)  # type: ignore[arg-type]
    return config.workers / simulate(trace, config).steps_per_s.value


# --- the server's updates on the host's cores ------------------------------------------------


@pytest.mark.parametrize(
    ("cores", "per_op", "expected"),
    [
        # Cores of their own (before issue 47): update l1 [0.060, 0.070] beside backward l0
        # [0.060, 0.080], then update l0 to 0.085.
        (None, None, 0.085),
        # One core: update l1 and backward l0 at half a core each from 0.060; the update's
        # 0.010 is done at 0.080, backward l0's last 0.010 alone at 0.090, update l0 at 0.095:
        # the core never idles, so the step is all the computation, 0.095.
        (1.0, 1.0, 0.095),
        (2.0, 1.0, 0.085),  # two cores, one wanted by each: no contention
        (2.0, 2.0, 0.095),  # profiled on two threads, two ops want four cores of two
    ],
)
def test_an_update_beside_the_backward_shares_the_cores(
    cores: float | None, per_op: float | None, expected: float
) -> None:
    # Server and worker on one host, its network: every transfer takes no time.
    got = step_s(two_layers(), server_host=0, host_cpu_cores=cores, worker_cpu_cores=per_op)
    assert got == pytest.approx(expected, rel=REL)


def test_the_ops_complete_when_processor_sharing_says() -> None:
    config = SimulationConfig(
        steps=2,
        warmup_steps=0,
        mode="sync",
        bandwidth_bps=B,
        server_host=0,
        host_cpu_cores=1.0,
        timeline=True,
    )
    timeline = simulate(two_layers(), config).timeline
    assert timeline is not None
    ends = {r.op: r.end_s for r in timeline if r.step == 0}
    assert ends["backward:l1"] == pytest.approx(0.060, rel=REL)
    assert ends["update:l1"] == pytest.approx(0.080, rel=REL)  # 0.010 at half a core
    assert ends["backward:l0"] == pytest.approx(0.090, rel=REL)  # half, then alone
    assert ends["update:l0"] == pytest.approx(0.095, rel=REL)


def test_a_transfer_cpu_cost_takes_the_general_cpu_link_to_the_same_times() -> None:
    # comm_cpu_s_per_byte puts the host CPU on the general link; the transfers stay on the
    # machine here, so they want no CPU and the step is the one-core step above.
    got = step_s(two_layers(), server_host=0, host_cpu_cores=1.0, comm_cpu_s_per_byte=1e-9)
    assert got == pytest.approx(0.095, rel=REL)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_two_workers_and_their_server_on_one_core(mode: str) -> None:
    # All on one core, nothing on the network: the core never idles, so each (lock-step)
    # step of the pair takes both workers' computation, 2 x 0.095 s.
    got = step_s(
        two_layers(),
        mode=mode,
        workers=2,
        colocated_workers=2,
        server_host=0,
        host_cpu_cores=1.0,
        steps=40,
        warmup_steps=4,
    )
    assert got == pytest.approx(0.190, rel=REL)


@pytest.mark.parametrize(
    ("cores", "nic", "expected"),
    [
        # Worker 1 beside the server: its transfers take no time, its update [0.030, 0.042].
        # Worker 0 pulls 0.005, computes to 0.035, pushes to 0.040; its update then shares
        # host 1's core with worker 1's last 0.002 (done at 0.044) and ends at 0.054.
        (1.0, "shared", 0.054),
        (None, "shared", 0.052),  # the server's own cores: worker 0's update 0.040 .. 0.052
        # Both pull at once (0.010), compute to 0.040, push at once (0.050), and both updates
        # share host 1's core: 0.024 of work, to 0.074.
        (1.0, "own", 0.074),
    ],
)
def test_a_server_on_another_workers_host_computes_there(
    cores: float | None, nic: str, expected: float
) -> None:
    got = step_s(one_layer(), workers=2, server_host=1, server_nic=nic, host_cpu_cores=cores)
    assert got == pytest.approx(expected, rel=REL)


# --- the server's network: its host's, or its own NIC ---------------------------------------


@pytest.mark.parametrize(
    ("nic", "shared_nic", "expected"),
    [
        # Host 0's workers: no transfers, 0.042. Host 1's two share the server's link (and
        # their NIC): pull and push 2 x 0.005 each, 0.062.
        ("shared", True, 0.062),
        # Every worker's transfers cross the server's link: four at once, 4 x 0.005 each way.
        ("own", False, 0.082),
        ("own", True, 0.082),  # B/4 each: under half of each host's NIC
    ],
)
def test_own_nic_sends_the_hosts_transfers_over_the_servers_link(
    nic: str, shared_nic: bool, expected: float
) -> None:
    got = step_s(
        one_layer(),
        workers=4,
        colocated_workers=2,
        server_host=0,
        server_nic=nic,
        shared_nic=shared_nic,
    )
    assert got == pytest.approx(expected, rel=REL)


def test_one_core_with_own_nic_adds_the_transfers() -> None:
    # pull l0 [0, 0.005], forward l0 to 0.015 (pull l1 done at 0.010), forward l1 to 0.035,
    # backward l1 to 0.065; push l1 to 0.070 while backward l0 runs alone (0.005 of it), then
    # update l1 beside backward l0's 0.015 left: the update at 0.090, backward l0 at 0.095;
    # push l0 to 0.100, update l0 to 0.105.
    got = step_s(two_layers(), server_host=0, server_nic="own", host_cpu_cores=1.0)
    assert got == pytest.approx(0.105, rel=REL)
    # Two workers on that core, each with its own link: pulls 0.010 (two at once), compute at
    # half a core to 0.030 and 0.070, pushes to 0.080, both updates on the core to 0.104.
    two = step_s(
        one_layer(),
        workers=2,
        colocated_workers=2,
        server_host=0,
        server_nic="own",
        shared_nic=False,
        host_cpu_cores=1.0,
    )
    assert two == pytest.approx(0.104, rel=REL)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_own_nic_without_shared_cores_is_exactly_a_server_machine_of_its_own(mode: str) -> None:
    trace = load_trace("cnn-b32")
    common: dict[str, object] = {
        "workers": 3,
        "colocated_workers": 3,
        "shared_nic": False,
        "bandwidth_bps": 1e9,
        "steps": 30,
        "warmup_steps": 5,
        "mode": mode,
    }
    apart = simulate(trace, SimulationConfig(**common))  # type: ignore[arg-type]
    config = SimulationConfig(**common, server_host=0, server_nic="own")  # type: ignore[arg-type]
    beside = simulate(trace, config)
    assert beside.examples_per_s.value == apart.examples_per_s.value


# --- the checks ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"workers": 4, "colocated_workers": 2, "server_host": 2},
            r"server_host: must be a host index 0\.\.1 \(4 workers, 2 per host\), got 2",
        ),
        ({"workers": 2, "server_host": -1}, r"server_host: must be a worker index 0\.\.1"),
        (
            {"workers": 2, "colocated_workers": 2, "server_host": 0, "arch": "allreduce"},
            "server_host: arch='allreduce' has no parameter servers",
        ),
        (
            {"workers": 2, "colocated_workers": 2, "server_host": 0, "arch": "ddp"},
            "server_host: arch='ddp' has no parameter servers",
        ),
        ({"server_nic": "own"}, "server_nic: 'own' needs server_host"),
        ({"server_nic": "own", "arch": "allreduce"}, "server_nic: 'own' needs server_host"),
        ({"server_host": 0, "server_nic": "mine"}, "server_nic: 'mine' is not one of shared, own"),
    ],
)
def test_settings_are_checked(settings: dict[str, object], message: str) -> None:
    mode = "sync" if settings.get("arch") in ("allreduce", "ddp") else "async"
    with pytest.raises(ConfigError, match=message):
        SimulationConfig(mode=mode, **settings)  # type: ignore[arg-type]


def test_a_server_host_with_colocated_workers_is_a_host() -> None:
    config = SimulationConfig(workers=4, colocated_workers=2, server_host=1)
    assert [config.server_is_local(w) for w in range(4)] == [False, False, True, True]
    own = SimulationConfig(workers=4, colocated_workers=2, server_host=1, server_nic="own")
    assert not any(own.server_is_local(w) for w in range(4))


# --- the command line ------------------------------------------------------------------------

SYNC = ["--mode", "sync", "--steps", "6", "--warmup", "1", "--replications", "1"]


@pytest.fixture()
def trace_path(tmp_path: Path) -> str:
    return str(save_trace(one_layer(), tmp_path / "one-layer.json"))


def simulate_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main(["simulate", *args, "--bandwidth", "1Gbps", *SYNC, "--json"]) == 0
    return point(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("own", "nic", "expected"), [(False, "shared", 0.084), (True, "own", 0.104)]
)
def test_simulate_puts_the_server_on_a_host(
    capsys: pytest.CaptureFixture[str], trace_path: str, own: bool, nic: str, expected: float
) -> None:
    # Two workers and the server on one core: 2 x 0.042 s of computation with the transfers
    # on the machine; with a NIC each, 0.104 (test_one_core_with_own_nic_adds_the_transfers).
    args = [trace_path, "--workers", "2", "--colocated", "2", "--server-host", "0"]
    args += ["--host-cores", "1", "--worker-cores", "1", *(["--own-nics"] if own else [])]
    doc = simulate_json(capsys, *args)
    config = doc["config"]
    assert isinstance(config, dict)
    assert config["server_host"] == 0 and config["server_nic"] == nic
    assert config["shared_nic"] is not own
    steps = doc["steps_per_s"]
    assert isinstance(steps, dict)
    assert steps["value"] == pytest.approx(2 / expected, rel=REL)
    assert main(["simulate", *args, "--bandwidth", "1Gbps", *SYNC]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("servers")]
    where = "with a NIC of their own" if own else "sharing its NIC"
    assert line.startswith(f"servers    on host 0, {where}")
    assert line.endswith("their updates share its 1 CPU cores")


def test_own_nics_is_a_no_op_for_a_worker_alone_on_its_host(
    capsys: pytest.CaptureFixture[str], trace_path: str
) -> None:
    # One command line for a sweep from W = 1: a worker alone has its host's NIC anyway.
    alone = simulate_json(capsys, trace_path, "--workers", "1")
    own = simulate_json(capsys, trace_path, "--workers", "1", "--own-nics")
    assert own["steps_per_s"] == alone["steps_per_s"]
    # ... whereas a server beside it then has its own link: the transfers take time.
    beside = simulate_json(capsys, trace_path, "--workers", "1", "--server-host", "0")
    apart = simulate_json(capsys, trace_path, "--workers", "1", "--server-host", "0", "--own-nics")
    for doc, step in ((beside, 0.042), (apart, 0.042 + 2 * P)):
        steps = doc["steps_per_s"]
        assert isinstance(steps, dict)
        assert steps["value"] == pytest.approx(1 / step, rel=REL)


def test_a_server_host_out_of_range_is_one_line(
    capsys: pytest.CaptureFixture[str], trace_path: str
) -> None:
    argv = ["simulate", trace_path, "--workers", "2", "--colocated", "2", "--server-host", "1"]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "sgdsim: error: --server-host: must be a host index 0..0 (2 workers, 2 per host), got 1"
    ]
