"""Topologies as data: the JSON form, the shipped sample, and the simulator settings they give."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simcore.errors import ConfigError, TraceError
from simcore.sim import SimulationConfig
from simcore.topology import Topology, topology_from_dict, topology_to_dict
from simcore.topology_io import load_topology, save_topology, topology_sample_names


def test_the_aws_sample_is_the_papers_host() -> None:
    assert "aws-p3.16xlarge" in topology_sample_names()
    host = load_topology("aws-p3.16xlarge")
    assert (host.devices_per_host, host.nic_bandwidth_bps, host.flow_cap_bps) == (8, 25e9, 10e9)
    assert host.with_hosts(4).devices == 32


def test_round_trip_through_a_file(tmp_path: Path) -> None:
    topo = Topology(hosts=3, devices_per_host=4, nic_bandwidth_bps=1e10, intra_bandwidth_bps=1e11)
    path = save_topology(topo, tmp_path / "t.json")
    assert load_topology(path) == topo
    with pytest.raises(ConfigError, match="already exists"):
        save_topology(topo, path)
    assert "flow_cap_bps" not in topology_to_dict(topo)


def test_simulation_settings_for_a_parameter_server_and_a_ring() -> None:
    topo = Topology(4, 8, 25e9, 1.2e12, flow_cap_bps=10e9, server_bandwidth_bps=50e9)
    ps = topo.simulation_config(SimulationConfig(mode="sync"))
    assert (ps.workers, ps.devices_per_host, ps.intra_bandwidth_bps) == (4, 8, 1.2e12)
    assert (ps.bandwidth_bps, ps.worker_bandwidth_bps, ps.flow_cap_bps) == (50e9, 25e9, 10e9)
    ring = topo.simulation_config(SimulationConfig(mode="sync", arch="allreduce"))
    assert (ring.bandwidth_bps, ring.worker_bandwidth_bps) == (25e9, None)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schema": "other"}, "'schema' must be 'sgdsim.topology'"),
        ({"version": 2}, "'version' 2 is not supported"),
        ({"hosts": 0}, "hosts: must be an integer >= 1, got 0"),
        ({"devices_per_host": 8, "intra_bandwidth_bps": None}, "intra_bandwidth_bps: needed"),
        ({"nic_bandwidth_bps": "25Gbps"}, "nic_bandwidth_bps: must be a finite number"),
        ({"flow_cap": 1e9}, "unknown field(s) flow_cap"),
    ],
)
def test_bad_files_name_the_file_and_the_field(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    doc = {"schema": "sgdsim.topology", "version": 1, "nic_bandwidth_bps": 1e10}
    doc.update(change)
    doc = {k: v for k, v in doc.items() if v is not None}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceError) as info:
        load_topology(path)
    assert str(path) in str(info.value) and message in str(info.value)


def test_a_missing_nic_is_named() -> None:
    with pytest.raises(TraceError, match="'nic_bandwidth_bps' is required"):
        topology_from_dict({"schema": "sgdsim.topology", "version": 1}, "x.json")


def test_server_host_goes_to_the_simulator_for_a_parameter_server_only() -> None:
    topo = Topology(2, 8, 25e9, 1.2e12, server_host=1)
    assert topo.simulation_config(SimulationConfig()).server_host == 1
    ring = topo.simulation_config(SimulationConfig(arch="allreduce", mode="sync"))
    assert ring.server_host is None
    assert "servers on host 1" in topo.summary()
    with pytest.raises(ConfigError, match=r"server_host: must be a host index 0\.\.1, got 2"):
        Topology(2, server_host=2)
