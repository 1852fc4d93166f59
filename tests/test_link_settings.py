"""A network profile's effects on the command line: option beats profile beats default, for every
command; the values reach the simulator; and what a model cannot use is said, not dropped."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from simcore.cli.main import main
from simcore.link_settings import LinkSettings, Sourced
from simcore.network import network_profile_to_dict
from simcore.network_effects import (
    EFFECT_KEYS,
    Duplex,
    DuplexInterference,
    FlowSharing,
    RingGoodput,
    TransferCpu,
)
from simcore.network_io import load_network_profile, save_network_profile
from simcore.sim import SimulationConfig

from output_support import output, point

RUN = ["--steps", "60", "--warmup", "10"]
CV, S_PER_BYTE, CORES = 0.26, 38e-9, 2.0
RING = ((2, 800e6), (4, 700e6))


@pytest.fixture()
def profile_path(tmp_path: Path) -> Path:
    """veth-1gbit's fit with every effect measured: a version 2 profile."""
    measured = dataclasses.replace(
        load_network_profile("veth-1gbit"),
        flow_sharing=FlowSharing(CV, method="test"),
        transfer_cpu=TransferCpu(S_PER_BYTE, CORES, method="test"),
        ring_goodput=RingGoodput(RING, method="test"),
        duplex=Duplex(1.78, method="test"),  # not the sample's, which a re-measurement moves
        duplex_interference=None,  # the ratio's model here (the interference: below)
    )
    return save_network_profile(measured, tmp_path / "full.json")


@pytest.fixture()
def interfered_path(profile_path: Path, tmp_path: Path) -> Path:
    """The same profile with the two directions' interference (version 5), which wins over its
    ratio."""
    measured = dataclasses.replace(
        load_network_profile(profile_path),
        duplex_interference=DuplexInterference(0.9, 0.7, 0.2, method="test"),
        source="<memory>",
    )
    return save_network_profile(measured, tmp_path / "interfered.json")


def simulate_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["simulate", "cnn-b32", "--workers", "3", "--json", *RUN, *args]) == 0
    return point(capsys.readouterr().out)


# --- simulate: every value from the option, else the profile, else the default -------------------


@pytest.mark.parametrize(
    ("config_key", "option", "value", "expected"),
    [
        ("bandwidth_bps", "--bandwidth", "2Gbps", 2e9),
        ("latency_s", "--latency", "1ms", 1e-3),
        ("flow_weight_cv", "--flow-weight-cv", "0.5", 0.5),
        ("comm_cpu_s_per_byte", "--comm-cpu", "10", 10e-9),
        ("host_cpu_cores", "--host-cores", "4", 4.0),
    ],
)
def test_simulate_option_beats_profile_beats_default(
    capsys: pytest.CaptureFixture[str],
    profile_path: Path,
    config_key: str,
    option: str,
    value: str,
    expected: float,
) -> None:
    profile = load_network_profile(profile_path)
    from_profile = {
        "bandwidth_bps": profile.bandwidth_bps,
        "latency_s": profile.latency_s,
        "flow_weight_cv": CV,
        "comm_cpu_s_per_byte": S_PER_BYTE,
        "host_cpu_cores": CORES,
    }
    defaults = SimulationConfig(bandwidth_bps=10e9)
    name = str(profile_path)
    default = simulate_json(capsys)
    assert default["config"][config_key] == getattr(defaults, config_key)
    profiled = simulate_json(capsys, "--network", name)
    assert profiled["config"][config_key] == pytest.approx(from_profile[config_key])
    chosen = simulate_json(capsys, "--network", name, option, value)
    assert chosen["config"][config_key] == pytest.approx(expected)
    link_key = "host_cpu_cores" if config_key == "host_cpu_cores" else config_key
    assert default["link"][link_key]["source"] == "default"
    assert profiled["link"][link_key]["source"] == name
    assert chosen["link"][link_key]["source"] == option


def test_profile_flow_weights_change_an_async_run_reproducibly_and_are_named(
    capsys: pytest.CaptureFixture[str], profile_path: Path
) -> None:
    args = ["simulate", "cnn-b32", "--workers", "4", *RUN, "--bandwidth", "100Mbps"]
    runs = []
    for extra in ([], ["--network", str(profile_path)], ["--network", str(profile_path)]):
        assert main([*args, *extra, "--comm-cpu", "0", "--json"]) == 0
        runs.append(point(capsys.readouterr().out))
    plain, weighted, again = runs
    assert weighted["config"]["flow_weight_cv"] == CV and plain["config"]["flow_weight_cv"] == 0
    assert weighted["examples_per_s"] == again["examples_per_s"]  # same seed, same result
    assert weighted["examples_per_s"] != plain["examples_per_s"]
    assert main([*args, "--network", str(profile_path), "--comm-cpu", "0"]) == 0
    text = capsys.readouterr().out
    assert (
        f"link: 100 Mbit/s (--bandwidth) + 33.5 us ({profile_path}), "
        f"flow weight cv 0.26 ({profile_path}), both directions 1.78x one ({profile_path}), "
        "transfer CPU off (--comm-cpu)"
    ) in text
    assert "note:" not in text  # the profile carries everything


def test_text_names_each_source(capsys: pytest.CaptureFixture[str], profile_path: Path) -> None:
    assert (
        main(["simulate", "cnn-b32", "--workers", "3", *RUN, "--network", str(profile_path)]) == 0
    )
    line = capsys.readouterr().out.splitlines()[-1]
    assert line == (
        f"link: 920 Mbit/s + 33.5 us ({profile_path}), flow weight cv 0.26 ({profile_path}), "
        f"both directions 1.78x one ({profile_path}), transfer CPU 38 ns/B on 2 cores "
        f"({profile_path})"
    )


def test_a_profiles_interference_wins_over_its_ratio_and_options_choose(
    capsys: pytest.CaptureFixture[str], interfered_path: Path
) -> None:
    name = str(interfered_path)
    profiled = simulate_json(capsys, "--network", name)
    assert profiled["config"]["duplex_interference"] == [0.9, 0.7, 0.2]
    assert profiled["config"]["duplex_bps"] is None
    assert profiled["link"]["duplex_interference"] == {
        "value": [0.9, 0.7, 0.2],
        "source": name,
        "used": True,
    }
    assert profiled["link"]["duplex_ratio"]["used"] is False
    ratio = simulate_json(capsys, "--network", name, "--duplex", "1.5")
    assert ratio["config"]["duplex_interference"] is None
    assert ratio["config"]["duplex_bps"] == pytest.approx(1.5 * 920e6, rel=0.01)
    given = simulate_json(capsys, "--network", name, "--duplex-interference", "1,0.5,0")
    assert given["config"]["duplex_interference"] == [1.0, 0.5, 0.0]
    assert given["link"]["duplex_interference"]["source"] == "--duplex-interference"
    assert main(["simulate", "cnn-b32", "--workers", "3", *RUN, "--network", name]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    # 0.9 * 0.5 ** 0.7 = 0.554, 0.9 * 0.5 ** 0.2 = 0.783
    assert (
        "each direction slowed by the other's transfers (efficiency 0.90, pull exponent 0.70, "
        "push exponent 0.20: one pull against two pushes at 55% of its bandwidth, one push "
        f"against two pulls at 78%) ({name})"
    ) in line


def test_interference_on_a_ring_is_refused_from_an_option_and_left_out_from_a_profile(
    capsys: pytest.CaptureFixture[str], interfered_path: Path
) -> None:
    ring = ["--arch", "allreduce", "--mode", "sync"]
    refused = ["simulate", "cnn-b32", "--workers", "3", *RUN, *ring]
    assert main([*refused, "--duplex-interference", "0.9,0.7,0.2"]) != 0
    err = capsys.readouterr().err
    assert "--duplex-interference: applies to one parameter server's link, not --arch" in err
    out = simulate_json(capsys, "--network", str(interfered_path), *ring)
    assert out["config"]["duplex_interference"] is None
    assert out["link"]["duplex_interference"]["used"] is False


def test_v1_profile_runs_with_a_note(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    doc = network_profile_to_dict(load_network_profile("veth-1gbit"))
    v1 = {key: value for key, value in doc.items() if key not in EFFECT_KEYS}
    path = tmp_path / "old.json"
    path.write_text(json.dumps({**v1, "schema_version": 1}))
    assert main(["simulate", "cnn-b32", "--workers", "2", *RUN, "--network", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    link = out.index(
        f"link: 920 Mbit/s + 33.5 us ({path}), flow weight cv off, full duplex, transfer CPU off"
    )
    assert out[link + 1].startswith(
        f"note: network profile {path} has no flow weight cv, transfer CPU cost, ring "
        "AllReduce goodput, duplex goodput, schema version 1"
    )


def test_shipped_testbed_profile_carries_every_effect(capsys: pytest.CaptureFixture[str]) -> None:
    profile = load_network_profile("veth-1gbit")
    assert profile.lacks == () and profile.flow_sharing is not None
    assert main(["simulate", "cnn-b32", "--workers", "2", *RUN, "--network", "veth-1gbit"]) == 0
    out = capsys.readouterr().out.splitlines()
    pull, push = profile.flow_sharing.pull_cv, profile.flow_sharing.push_cv
    assert pull is not None and push is not None  # measured per direction
    assert profile.duplex is not None and 1 < profile.duplex.ratio < 2
    # both models of the two directions measured; the interference is the one used
    interference = profile.duplex_interference
    assert interference is not None and 0 < interference.efficiency <= 1
    assert out[-1].startswith(
        f"link: 920 Mbit/s + 33.5 us (veth-1gbit), flow weight cv {pull:.3g} pull / "
        f"{push:.3g} push (veth-1gbit), {interference.text()} (veth-1gbit), transfer CPU "
    )
    # Each direction of the server's link gets its own measured cv.
    doc = simulate_json(capsys, "--network", "veth-1gbit")
    assert doc["config"]["flow_weight_cv"] == pull
    assert doc["config"]["flow_weight_cv_push"] == push
    # One value given on the command line is both directions'.
    doc = simulate_json(capsys, "--network", "veth-1gbit", "--flow-weight-cv", "0.3")
    assert doc["config"]["flow_weight_cv"] == 0.3
    assert doc["config"]["flow_weight_cv_push"] is None


def test_an_uplink_cv_equal_to_the_downlinks_changes_nothing() -> None:
    from simcore.sim import simulate
    from simcore.trace.io import load_trace

    trace = load_trace("cnn-b32")
    base = SimulationConfig(
        workers=3, bandwidth_bps=1e8, steps=30, warmup_steps=5, flow_weight_cv=0.3, timeline=True
    )
    same = simulate(trace, dataclasses.replace(base, flow_weight_cv_push=0.3))
    plain = simulate(trace, base)
    assert same.timeline is not None and plain.timeline is not None
    assert (same.timeline.end_s == plain.timeline.end_s).all()
    # A different uplink cv changes the pushes, from the same stream of draws.
    other = simulate(trace, dataclasses.replace(base, flow_weight_cv_push=0.8))
    assert other.timeline is not None
    assert other.steps_per_s.value != plain.steps_per_s.value
    again = simulate(trace, dataclasses.replace(base, flow_weight_cv_push=0.8))
    assert again.steps_per_s == other.steps_per_s  # same seed, same run


def test_flow_weights_from_a_profile_stay_off_where_they_do_not_apply(
    capsys: pytest.CaptureFixture[str], profile_path: Path
) -> None:
    doc = simulate_json(capsys, "--network", str(profile_path), "--sharing", "fcfs")
    assert doc["config"]["flow_weight_cv"] == 0
    assert doc["link"]["flow_weight_cv"] == {
        "value": CV,
        "source": str(profile_path),
        "used": False,
    }
    # Given explicitly for such a link, it is an error naming the option.
    assert main(["simulate", "cnn-b32", *RUN, "--sharing", "fcfs", "--flow-weight-cv", "0.2"]) == 1
    assert "--flow-weight-cv: flow weights apply to a parameter server's link with ps sharing" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize(("workers", "measured_at"), [(2, 2), (3, 4), (8, 4)])
def test_ring_uses_the_profile_goodput_of_the_nearest_w(
    capsys: pytest.CaptureFixture[str], profile_path: Path, workers: int, measured_at: int
) -> None:
    args = ["--arch", "allreduce", "--mode", "sync", "--network", str(profile_path)]
    doc = simulate_json(capsys, *args, "--workers", str(workers))
    assert doc["config"]["bandwidth_bps"] == dict(RING)[measured_at]
    assert doc["link"]["ring_bandwidth_bps"]["workers_measured"] == measured_at
    # An explicit bandwidth wins over the ring's goodput too.
    doc = simulate_json(capsys, *args, "--workers", str(workers), "--bandwidth", "1Gbps")
    assert doc["config"]["bandwidth_bps"] == 1e9 and doc["link"]["ring_bandwidth_bps"] is None


# --- timeline, analyze, advise, validate ---------------------------------------------------------


def test_timeline_applies_the_profile_and_names_it(
    capsys: pytest.CaptureFixture[str], profile_path: Path, tmp_path: Path
) -> None:
    chrome = tmp_path / "t.json"
    args = ["timeline", "cnn-b32", "--workers", "2", "--steps", "6", "--chrome", str(chrome)]
    assert main([*args, "--network", str(profile_path), "--host-cores", "3"]) == 0
    err = capsys.readouterr().err
    assert f"flow weight cv 0.26 ({profile_path})" in err
    assert f"transfer CPU 38 ns/B ({profile_path}) on 3 cores (--host-cores)" in err


def test_analyze_uses_the_bandwidth_and_says_what_it_cannot_model(
    capsys: pytest.CaptureFixture[str], profile_path: Path
) -> None:
    args = ["analyze", "cnn-b32", "--workers", "2", "--network", str(profile_path)]
    assert main([*args, "--flow-weight-cv", "0.4"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2] == f"link: B 920 Mbit/s ({profile_path})"
    assert out[-1].startswith("not modelled: the coarse models have no per-transfer latency")
    assert (
        f"latency 33.5 us ({profile_path}), flow weight cv 0.4 (--flow-weight-cv), transfer CPU "
        f"38 ns/B on 2 cores ({profile_path})"
    ) in out[-1]
    assert main([*args, "--bandwidth", "1Gbps", "--json"]) == 0
    link = output(capsys.readouterr().out)["context"]["link"]
    assert link["bandwidth_bps"] == {"value": 1e9, "source": "--bandwidth"}
    assert set(link["not_modelled"]) == {
        "latency_s",
        "flow_weight_cv",
        "comm_cpu_s_per_byte",
        "duplex_bps",
    }


def test_analyze_ring_column_uses_the_ring_goodput(
    capsys: pytest.CaptureFixture[str], profile_path: Path
) -> None:
    args = ["analyze", "cnn-b32", "--workers", "2", "--mode", "sync", "--json"]
    assert main([*args, "--bandwidth", "800Mbps"]) == 0
    at_ring_rate = output(capsys.readouterr().out)["points"][0]["allreduce"]
    assert main([*args, "--network", str(profile_path)]) == 0
    doc = output(capsys.readouterr().out)
    assert doc["points"][0]["allreduce"] == at_ring_rate  # 800 Mbit/s measured at W = 2
    assert doc["points"][0]["ps"] != at_ring_rate
    assert doc["context"]["link"]["ring_bandwidth_bps"]["2"]["workers_measured"] == 2


def test_advise_simulations_use_the_effects(
    capsys: pytest.CaptureFixture[str], profile_path: Path
) -> None:
    args = ["advise", "cnn-b32", "--machines", "3", "--steps", "30", "--confirm", "1", "--json"]
    assert main([*args, "--network", str(profile_path), "--comm-cpu", "5"]) == 0
    link = output(capsys.readouterr().out)["context"]["link"]
    assert link["bandwidth_bps"]["source"] == str(profile_path)
    assert link["simulated_effects"]["flow_weight_cv"] == {"value": CV, "source": str(profile_path)}
    assert link["simulated_effects"]["comm_cpu_s_per_byte"] == {
        "value": 5e-9,
        "source": "--comm-cpu",
    }
    assert link["ring_goodput_used"] is True


def test_settings_apply_only_where_they_apply() -> None:
    settings = LinkSettings(
        Sourced(1e9, "p"),
        flow_weight_cv=Sourced(0.3, "p"),
        comm_cpu_s_per_byte=Sourced(1e-8, "p"),
        host_cpu_cores=Sourced(2.0, "p"),
        ring=RingGoodput(RING),
        profile="p",
    )
    ps = settings.apply(SimulationConfig(bandwidth_bps=1.0, workers=2))
    assert (ps.bandwidth_bps, ps.flow_weight_cv, ps.host_cpu_cores) == (1e9, 0.3, 2.0)
    ring = settings.apply(SimulationConfig(bandwidth_bps=1.0, arch="allreduce", mode="sync"))
    assert (ring.bandwidth_bps, ring.flow_weight_cv) == (800e6, 0.0)
    own_cores = settings.apply(SimulationConfig(bandwidth_bps=1.0, host_cpu_cores=8.0))
    assert own_cores.host_cpu_cores == 8.0 and own_cores.comm_cpu_s_per_byte == 1e-8


def test_validate_takes_a_profile_over_what_it_measured_and_an_option_over_both(
    capsys: pytest.CaptureFixture[str], profile_path: Path, tmp_path: Path
) -> None:
    from test_validation_measurements import measurements

    from profilers.distributed.link_profile import measured_network_profile
    from profilers.distributed.measurements import save_measurements
    from profilers.distributed.to_trace import run_to_trace

    m = measurements()
    runs = save_measurements(m, tmp_path / "runs.json.gz")
    args = ["validate", "--from-runs", str(runs), "--quiet", "--json"]
    assert main(args) == 0
    measured = output(capsys.readouterr().out)["context"]
    # each direction its own measured spread, as --network applies a profile's
    sharing = measured_network_profile(m, run_to_trace(m.solo)).flow_sharing
    assert sharing is not None and sharing.pull_cv is not None and sharing.push_cv is not None
    assert sharing.pull_cv != sharing.push_cv
    cvs = f"flow weight cv {sharing.pull_cv:.3g} pull / {sharing.push_cv:.3g} push (measured)"
    assert cvs in measured["link"]
    assert measured["flow_weight_cv"] == sharing.pull_cv
    assert "(measured one flow)" in measured["link"]
    assert main([*args, "--network", str(profile_path), "--flow-weight-cv", "0.5"]) == 0
    doc = output(capsys.readouterr().out)["context"]
    assert doc["bandwidth_bps"] == load_network_profile(profile_path).bandwidth_bps
    assert doc["flow_weight_cv"] == 0.5
    assert doc["link"] == (
        f"link: 920 Mbit/s ({profile_path}) + 33.5 us ({profile_path}), ring AllReduce goodput "
        f"per W ({profile_path}), flow weight cv 0.5 (--flow-weight-cv), transfer CPU 38 ns/B "
        f"({profile_path}); parameter server: both directions together at most 1.64 Gbit/s "
        f"(1.78x one way, {profile_path}); parameter server: the workers' CPU beside their "
        "computation not charged (these runs did not record their CPU time)"
    )


def test_validate_saves_what_it_measured_as_a_profile_the_others_read(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from test_validation_measurements import measurements

    from profilers.distributed.measurements import save_measurements

    measured = measurements()
    assert measured.sharing is not None and measured.ring is not None
    runs = save_measurements(measured, tmp_path / "runs.json.gz")
    saved = tmp_path / "measured-link.json"
    args = ["validate", "--from-runs", str(runs), "--quiet", "--save-network", str(saved)]
    assert main(args) == 0
    capsys.readouterr()
    profile = load_network_profile(saved)
    assert profile.lacks == ()
    assert profile.bandwidth_bps == measured.sharing.goodput_bps()
    assert profile.flow_sharing is not None and profile.ring_goodput is not None
    assert profile.flow_sharing.weight_cv == measured.sharing.weight_cv()
    assert profile.ring_goodput.points == ((2, measured.ring.goodput_bps()),)
    # the ring's terms as the validation's ring predictions use them
    bandwidth = measured.sharing.goodput_bps()
    assert profile.ring_goodput.message_latency_s == measured.ring.message_latency_s(bandwidth)
    assert profile.ring_goodput.cpu_s_per_byte is not None
    assert profile.ring_goodput.cpu_s_per_byte >= 0
    assert main([*args]) == 1  # it is not overwritten without --force
    assert "already exists" in capsys.readouterr().err


# --- a ring's cost per message and CPU per byte (profile version 3) ---------------------------

MESSAGE_S, RING_CPU, SEGMENT = 400e-6, 3e-9, float(1 << 20)


@pytest.fixture()
def ring_terms_path(tmp_path: Path) -> Path:
    """veth-1gbit's fit with a ring measured the way `sgdsim validate --save-network` records
    it: the goodput, the fixed cost per message and the CPU per byte."""
    measured = dataclasses.replace(
        load_network_profile("veth-1gbit"),
        transfer_cpu=TransferCpu(S_PER_BYTE, CORES, method="test"),
        ring_goodput=RingGoodput(
            RING,
            method="test",
            message_latency_s=MESSAGE_S,
            cpu_s_per_byte=RING_CPU,
            segment_bytes=SEGMENT,
        ),
    )
    return save_network_profile(measured, tmp_path / "ring.json")


def ring_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    return simulate_json(capsys, "--arch", "allreduce", "--colocated", "3", *args)


def test_a_ring_uses_the_profiles_cost_per_message_and_cpu_per_byte(
    capsys: pytest.CaptureFixture[str], ring_terms_path: Path
) -> None:
    profile = load_network_profile(ring_terms_path)
    doc = ring_json(capsys, "--network", str(ring_terms_path), "--own-nics")
    config = doc["config"]
    # the link's one-flow bandwidth, not the goodput of a ring of two, which folds the
    # messages into a rate
    assert config["bandwidth_bps"] == profile.bandwidth_bps
    assert config["latency_s"] == MESSAGE_S
    # 2(W-1)/W of a layer's bytes sent and as many received, at the CPU per byte
    assert config["parse_alpha_s_per_byte"] == pytest.approx(RING_CPU * 4 * 2 / 3)
    assert config["parse_placement"] == "pipelined"
    assert config["ring_segment_bytes"] == SEGMENT  # as the cost per message was measured
    assert config["host_cpu_cores"] == CORES  # the profile's host, no --host-cores given
    assert config["comm_cpu_s_per_byte"] == 0.0  # the ring's own CPU replaces the transfers'
    assert config["shared_nic"] is False
    link = doc["link"]
    assert link["ring_message_latency_s"] == {"value": MESSAGE_S, "source": str(ring_terms_path)}
    assert link["ring_cpu_s_per_byte"] == {"value": RING_CPU, "source": str(ring_terms_path)}
    assert link["ring_bandwidth_bps"] is None


def test_a_ring_of_each_w_moves_its_bytes_at_the_rate_measured_for_it(
    capsys: pytest.CaptureFixture[str], ring_terms_path: Path, tmp_path: Path
) -> None:
    # version 4: the bytes' rate of rings of 2 and 4 measured; profile bandwidth 920 Mbit/s
    profile = load_network_profile(ring_terms_path)
    assert profile.ring_goodput is not None
    ring = dataclasses.replace(profile.ring_goodput, bandwidths=((2, 9.9e8), (4, 6e8)))
    path = save_network_profile(
        dataclasses.replace(profile, ring_goodput=ring), tmp_path / "4.json"
    )
    name = str(path)
    for workers, measured_at, rate in ((2, 2, profile.bandwidth_bps), (3, 4, 6e8), (8, 4, 6e8)):
        doc = simulate_json(
            capsys, "--arch", "allreduce", "--network", name, "--workers", str(workers)
        )
        # at most the profile's one-flow bandwidth; a tie (W = 3) and beyond (W = 8): the
        # larger W measured, not extrapolated
        assert doc["config"]["bandwidth_bps"] == rate
        assert doc["config"]["latency_s"] == MESSAGE_S
        assert doc["link"]["ring_bandwidth_bps"] == {
            "value": rate,
            "workers_measured": measured_at,
            "source": name,
        }
    assert (
        main(
            [
                "simulate",
                "cnn-b32",
                "--workers",
                "4",
                "--arch",
                "allreduce",
                *RUN,
                "--network",
                name,
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "600 Mbit/s (the bytes of a ring of 4) + 400 us per ring AllReduce message" in out
    # a bandwidth given as an option leaves the profile's ring out altogether
    doc = simulate_json(
        capsys, "--arch", "allreduce", "--network", name, "--workers", "4", "--bandwidth", "1Gbps"
    )
    assert doc["config"]["bandwidth_bps"] == 1e9 and doc["link"]["ring_bandwidth_bps"] is None


def test_the_ring_terms_say_where_they_came_from(
    capsys: pytest.CaptureFixture[str], ring_terms_path: Path
) -> None:
    name = str(ring_terms_path)
    args = ["simulate", "cnn-b32", "--workers", "3", "--arch", "allreduce", *RUN]
    assert main([*args, "--network", name, "--host-cores", "2"]) == 0
    out = capsys.readouterr().out
    per_message = "920 Mbit/s + 400 us per ring AllReduce message, in segments of at most 1.00 MiB"
    assert f"{per_message} ({name})" in out
    cpu = "ring CPU 3 ns per byte sent or received, on each message as it arrives on 2 cores"
    assert f"{cpu} ({name})" in out


@pytest.mark.parametrize(
    ("option", "value", "key", "expected"),
    [
        ("--latency", "1ms", "latency_s", 1e-3),  # instead of the cost per message
        ("--comm-cpu", "10", "comm_cpu_s_per_byte", 10e-9),  # the transfers' cost, not the ring's
        ("--parse-alpha", "1e-9", "parse_alpha_s_per_byte", 1e-9),
        ("--ring-segment", "64KiB", "ring_segment_bytes", 65536),
    ],
)
def test_options_beat_the_ring_terms(
    capsys: pytest.CaptureFixture[str],
    ring_terms_path: Path,
    option: str,
    value: str,
    key: str,
    expected: float,
) -> None:
    config = ring_json(capsys, "--network", str(ring_terms_path), option, value)["config"]
    assert config[key] == pytest.approx(expected)
    if option == "--comm-cpu":
        assert config["parse_alpha_s_per_byte"] == 0.0


def test_a_placement_given_beats_the_profiles_for_its_ring_cpu(
    capsys: pytest.CaptureFixture[str], ring_terms_path: Path
) -> None:
    """--parse-placement after: the profile's ring CPU per byte, charged after each
    all-reduce as asked (it was silently put back to pipelined), and said so."""
    name = str(ring_terms_path)
    after = ring_json(capsys, "--network", name, "--parse-placement", "after")["config"]
    assert after["parse_placement"] == "after"
    assert after["parse_alpha_s_per_byte"] == pytest.approx(RING_CPU * 4 * 2 / 3)
    given = ring_json(capsys, "--network", name, "--parse-placement", "pipelined")["config"]
    assert given["parse_placement"] == "pipelined"
    args = ["simulate", "cnn-b32", "--workers", "3", "--arch", "allreduce", *RUN]
    assert main([*args, "--network", name, "--parse-placement", "after"]) == 0
    out = capsys.readouterr().out
    assert "ring CPU 3 ns per byte sent or received, after each all-reduce" in out


def test_the_ring_terms_leave_other_architectures_and_profiles_alone(
    capsys: pytest.CaptureFixture[str], ring_terms_path: Path, profile_path: Path
) -> None:
    profile = load_network_profile(ring_terms_path)
    ps = simulate_json(capsys, "--network", str(ring_terms_path))["config"]
    assert ps["latency_s"] == profile.latency_s
    assert ps["parse_alpha_s_per_byte"] == 0.0
    assert ps["comm_cpu_s_per_byte"] == S_PER_BYTE
    one = simulate_json(
        capsys, "--network", str(ring_terms_path), "--arch", "allreduce", "--workers", "1"
    )["config"]
    assert one["parse_alpha_s_per_byte"] == 0.0  # one participant exchanges nothing
    # a version 2 ring: its goodput at the nearest W measured, as before
    old = ring_json(capsys, "--network", str(profile_path))["config"]
    assert old["bandwidth_bps"] == dict(RING)[4]
    assert old["parse_alpha_s_per_byte"] == 0.0


def test_own_nics_give_colocated_workers_a_link_each(capsys: pytest.CaptureFixture[str]) -> None:
    """Three ring workers on one host: sharing its NIC, each gets a third of it; on links of
    their own, they run as three hosts do (the computation aside, which is not shared here)."""
    args = ["--arch", "allreduce", "--bandwidth", "100Mbps"]
    shared = ring_json(capsys, *args)
    own = ring_json(capsys, *args, "--own-nics")
    hosts = simulate_json(capsys, *args)
    assert shared["config"]["shared_nic"] is True and own["config"]["shared_nic"] is False
    assert own["examples_per_s"]["value"] == pytest.approx(hosts["examples_per_s"]["value"])
    assert shared["examples_per_s"]["value"] < 0.6 * own["examples_per_s"]["value"]


def test_a_ring_whose_runs_showed_no_cpu_work_is_charged_none(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A profile's ring CPU of 0 (its one-worker runs computed no slower beside their
    transfers) still replaces the transfers' cost for a ring, and the line says 0."""
    profile = dataclasses.replace(
        load_network_profile("veth-1gbit"),
        transfer_cpu=TransferCpu(S_PER_BYTE, CORES, method="test"),
        ring_goodput=RingGoodput(RING, message_latency_s=MESSAGE_S, cpu_s_per_byte=0.0),
    )
    name = str(save_network_profile(profile, tmp_path / "ring0.json"))
    doc = ring_json(capsys, "--network", name)
    assert doc["config"]["comm_cpu_s_per_byte"] == 0.0
    assert doc["config"]["parse_alpha_s_per_byte"] == 0.0
    assert doc["link"]["ring_cpu_s_per_byte"] == {"value": 0.0, "source": name}
    args = ["simulate", "cnn-b32", "--workers", "3", "--arch", "allreduce", *RUN]
    assert main([*args, "--network", name]) == 0
    line = f"ring CPU 0 ns per byte sent or received, on each message as it arrives ({name})"
    assert line in capsys.readouterr().out
