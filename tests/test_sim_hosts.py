"""Hosts with several devices (TPDS'22 4.4): hierarchical aggregation against closed forms, and the
exact reduction to the flat simulator with one device per host."""

from __future__ import annotations

import pytest

from simcore.errors import ConfigError
from simcore.sim import SimulationConfig, SimulationResult, simulate
from simcore.trace.build import synthetic_trace
from simcore.trace.io import load_trace
from simcore.trace.model import Trace

REL = 1e-9
FWD = [0.010, 0.020, 0.005]
BWD = [0.020, 0.030, 0.015]
SIZES = [1_000_000, 2_000_000, 500_000]
T_C = sum(FWD) + sum(BWD)
M_BITS = 8.0 * sum(SIZES)
B_INTRA = 300e9 * 8  # 300 GB/s, NVLink-like


def run(trace: Trace, **kw: object) -> SimulationResult:
    base: dict[str, object] = {"steps": 6, "warmup_steps": 1, "intra_bandwidth_bps": B_INTRA}
    base.update(kw)
    return simulate(trace, SimulationConfig(**base))  # type: ignore[arg-type]


@pytest.mark.parametrize("g", [2, 4, 8])
def test_one_host_ring_is_an_intra_host_allreduce(g: int) -> None:
    # One host of G devices: no inter-host traffic; per layer, reduce-scatter and all-gather
    # among the devices, (G-1)/G of the bytes each, one after another on the intra-host link.
    trace = synthetic_trace(FWD, BWD, SIZES, overlap=False, batch_size=32)
    step = T_C + 2 * (g - 1) / g * M_BITS / B_INTRA
    result = run(trace, workers=1, devices_per_host=g, arch="allreduce", mode="sync")
    assert result.steps_per_s.value == pytest.approx(1 / step, rel=REL)
    assert result.examples_per_s.value == pytest.approx(g * 32 / step, rel=REL)


@pytest.mark.parametrize(("hosts", "g"), [(1, 8), (2, 4), (3, 8)])
def test_parameter_server_with_hosts_one_layer(hosts: int, g: int) -> None:
    # One layer: everything is in series. Every host's leader pulls at B/H (processor sharing),
    # broadcasts, the devices compute, reduce, the leader pushes at B/H, the server updates.
    size, fwd, bwd, upd, b = 4_000_000, 0.010, 0.020, 0.003, 10e9
    trace = synthetic_trace([fwd], [bwd], [size], update_s=upd, batch_size=16)
    intra = (g - 1) / g * 8 * size / B_INTRA
    step = hosts * 8 * size / b + intra + fwd + bwd + intra + hosts * 8 * size / b + upd
    result = run(
        trace, workers=hosts, devices_per_host=g, bandwidth_bps=b, mode="sync", sharing="ps"
    )
    assert result.steps_per_s.value == pytest.approx(hosts / step, rel=REL)
    assert result.examples_per_s.value == pytest.approx(hosts * g * 16 / step, rel=REL)


@pytest.mark.parametrize(("hosts", "flow_bps"), [(1, 10e9), (2, 10e9), (3, 25e9 / 3)])
def test_per_flow_cap_on_a_25_gbps_nic(hosts: int, flow_bps: float) -> None:
    # AWS p3.16xlarge: 25 Gbit/s NIC, 10 Gbit/s per flow. One or two concurrent flows get
    # 10 Gbit/s each; three share 25/3.
    size, fwd, bwd = 4_000_000, 0.010, 0.020
    g = 8
    trace = synthetic_trace([fwd], [bwd], [size], batch_size=16)
    intra = (g - 1) / g * 8 * size / B_INTRA
    step = 2 * 8 * size / flow_bps + 2 * intra + fwd + bwd
    result = run(
        trace,
        workers=hosts,
        devices_per_host=g,
        bandwidth_bps=25e9,
        flow_cap_bps=10e9,
        mode="sync",
        sharing="ps",
    )
    assert result.steps_per_s.value == pytest.approx(hosts / step, rel=REL)


@pytest.mark.parametrize(
    "settings",
    [
        {"workers": 3, "mode": "async", "sharing": "ps"},
        {"workers": 4, "mode": "sync", "sharing": "fcfs"},
        {"workers": 3, "mode": "sync", "arch": "allreduce"},
    ],
    ids=["async-ps", "sync-fcfs", "ring"],
)
def test_one_device_per_host_is_exactly_the_flat_simulator(settings: dict[str, object]) -> None:
    trace = load_trace("cnn-b32")
    common: dict[str, object] = {"bandwidth_bps": 1e9, "steps": 30, "warmup_steps": 5}
    flat = simulate(trace, SimulationConfig(**common, **settings))  # type: ignore[arg-type]
    hosts = simulate(
        trace,
        SimulationConfig(
            **common,  # type: ignore[arg-type]
            **settings,
            devices_per_host=1,
            intra_bandwidth_bps=B_INTRA,
        ),
    )
    assert hosts.examples_per_s == flat.examples_per_s
    assert hosts.simulated_ops == flat.simulated_ops


def test_more_devices_train_more_examples_per_step() -> None:
    trace = load_trace("cnn-b32")
    one = run(trace, workers=2, bandwidth_bps=1e9, steps=30, warmup_steps=5, mode="sync")
    eight = run(
        trace,
        workers=2,
        bandwidth_bps=1e9,
        steps=30,
        warmup_steps=5,
        mode="sync",
        devices_per_host=8,
    )
    # Same traffic over the NIC, a little intra-host work: almost 8x the examples per second.
    assert 7.0 * one.examples_per_s.value < eight.examples_per_s.value
    assert eight.examples_per_s.value < 8.0 * one.examples_per_s.value


def test_intra_bandwidth_is_required_and_checked() -> None:
    with pytest.raises(ConfigError, match="intra_bandwidth_bps: needed with devices_per_host=8"):
        SimulationConfig(devices_per_host=8)
    with pytest.raises(ConfigError, match="devices_per_host: must be an integer >= 1"):
        SimulationConfig(devices_per_host=0)
    with pytest.raises(ConfigError, match="intra_bandwidth_bps: must be a finite number > 0"):
        SimulationConfig(devices_per_host=2, intra_bandwidth_bps=-1.0)


def test_coarse_models_see_a_host_as_one_worker_and_agree_with_the_closed_forms() -> None:
    from simcore.analytic import Cluster, host_worker_type, predict_sync, worker_type_from_trace

    # One host, ring: Eq. 11 with K = 1 plus the intra-host AllReduce, as the simulator.
    g = 8
    trace = synthetic_trace(FWD, BWD, SIZES, overlap=False, batch_size=32)
    host = host_worker_type(worker_type_from_trace(trace), g, B_INTRA)
    assert host.batch_size == 32 * g
    ring = predict_sync(Cluster.homogeneous(host, 1, 25e9)).allreduce
    assert ring.step_s == pytest.approx(T_C + 2 * (g - 1) / g * M_BITS / B_INTRA, rel=REL)
    simulated = run(trace, workers=1, devices_per_host=g, arch="allreduce", mode="sync")
    assert ring.examples_per_s == pytest.approx(simulated.examples_per_s.value, rel=REL)
    # H hosts behind one server: Eq. 7 (processor sharing) equals the one-layer closed form.
    size, fwd, bwd, upd, b, hosts = 4_000_000, 0.010, 0.020, 0.003, 10e9, 3
    one_layer = synthetic_trace([fwd], [bwd], [size], update_s=upd, batch_size=16)
    host = host_worker_type(worker_type_from_trace(one_layer), g, B_INTRA)
    eq7 = predict_sync(Cluster.homogeneous(host, hosts, b)).ps
    simulated = run(
        one_layer, workers=hosts, devices_per_host=g, bandwidth_bps=b, mode="sync", sharing="ps"
    )
    assert eq7.examples_per_s == pytest.approx(simulated.examples_per_s.value, rel=REL)


def test_host_worker_type_checks_its_inputs() -> None:
    from simcore.analytic import host_worker_type, worker_type_from_trace

    worker = worker_type_from_trace(synthetic_trace([0.01], [0.02], [1000]))
    assert host_worker_type(worker, 1, None) is worker
    with pytest.raises(ConfigError, match="intra_bandwidth_bps"):
        host_worker_type(worker, 4, None)
    with pytest.raises(ConfigError, match="devices_per_host"):
        host_worker_type(worker, 0, 1e9)


def test_cli_takes_a_topology_and_hosts(capsys: pytest.CaptureFixture[str]) -> None:
    from simcore.cli.main import main

    from output_support import point

    args = [
        "simulate",
        "cnn-b32",
        "--topology",
        "aws-p3.16xlarge",
        "--hosts",
        "2",
        "--mode",
        "sync",
        "--steps",
        "20",
        "--warmup",
        "4",
        "--json",
    ]
    assert main(args) == 0
    config = point(capsys.readouterr().out)["config"]
    assert (config["workers"], config["devices_per_host"], config["flow_cap_bps"]) == (2, 8, 10e9)
    assert (config["bandwidth_bps"], config["worker_bandwidth_bps"]) == (25e9, 25e9)
    assert config["intra_bandwidth_bps"] == 1.2e12
    # Explicit options win over the topology's.
    assert main([*args[:-1], "--devices-per-host", "4", "--flow-cap", "5Gbps", "--json"]) == 0
    config = point(capsys.readouterr().out)["config"]
    assert (config["devices_per_host"], config["flow_cap_bps"]) == (4, 5e9)
    assert main(["analyze", "cnn-b32", "--topology", "aws-p3.16xlarge", "--workers", "2"]) == 0
    assert "x8 devices, batch 256/worker" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--workers", "2", "--hosts", "2"], "--hosts: give --hosts or --workers, not both"),
        (["--devices-per-host", "4"], "--intra-bandwidth: needed with 4 devices per host"),
        (["--topology", "no-such-host"], "no-such-host"),
    ],
)
def test_cli_host_errors_are_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from simcore.cli.main import main

    assert main(["simulate", "cnn-b32", *argv]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


@pytest.mark.parametrize(("server_host", "pull_hosts"), [(None, 2), (0, 1)])
def test_parameter_server_on_a_training_host(server_host: int | None, pull_hosts: int) -> None:
    # Two hosts, one layer, Sync-SGD: with dedicated servers both leaders share the server's link
    # (2S/B each way); with the servers on host 0, host 0's transfers stay on the machine and
    # host 1 has the link to itself (S/B).
    size, fwd, bwd, b, g = 4_000_000, 0.010, 0.020, 10e9, 4
    trace = synthetic_trace([fwd], [bwd], [size], batch_size=16)
    intra = (g - 1) / g * 8 * size / B_INTRA
    step = 2 * pull_hosts * 8 * size / b + fwd + bwd + 2 * intra
    result = run(
        trace,
        workers=2,
        devices_per_host=g,
        bandwidth_bps=b,
        mode="sync",
        sharing="ps",
        server_host=server_host,
    )
    assert result.steps_per_s.value == pytest.approx(2 / step, rel=REL)


def test_server_host_is_checked() -> None:
    with pytest.raises(ConfigError, match=r"server_host: must be a worker index 0\.\.1, got 2"):
        SimulationConfig(workers=2, server_host=2)
    with pytest.raises(ConfigError, match="server_host: arch='allreduce' has no parameter servers"):
        SimulationConfig(workers=2, server_host=0, arch="allreduce", mode="sync")
