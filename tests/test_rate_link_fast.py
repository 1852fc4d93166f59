"""The general link's lean paths (RateLink's one-channel re-plan, the engine's per-link transfer
CPU wants) against the general re-plan they shortcut: same seed, bit-identical runs.

``RateLink.fast_paths = False`` makes every RateLink re-plan through ``_replan_general`` and the
engine rebuild every host's wants from all links after each re-plan (the code before the lean
paths). Each case runs both ways with the timeline on and compares every op's start and end.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from simcore.sim import SimulationConfig, SimulationResult, simulate
from simcore.sim.rate_link import RateLink
from simcore.trace.io import load_trace

BASE: dict[str, Any] = {
    "bandwidth_bps": 920e6,
    "latency_s": 33.5e-6,
    "steps": 5,
    "warmup_steps": 1,
    "seed": 3,
    "timeline": True,
}
VETH: dict[str, Any] = {
    "flow_weight_cv": 0.16,
    "comm_cpu_s_per_byte": 2.086e-9,
    "host_cpu_cores": 2.0,
}
CAPS = (300e6, 500e6, 1e9, 200e6)

# name -> (settings, whether the one-channel path must be taken)
CASES: dict[str, tuple[dict[str, Any], bool]] = {
    "weighted ps": ({"workers": 4, "flow_weight_cv": 0.3}, True),
    "measured network, async": ({"workers": 4, **VETH}, True),
    "measured network, sync": ({"workers": 3, "mode": "sync", **VETH}, True),
    "measured network with a duplex limit": (
        {"workers": 4, **VETH, "duplex_bps": 1.6 * 920e6},
        True,
    ),
    "duplex limit, equal shares": ({"workers": 3, "duplex_bps": 1.2 * 920e6}, True),
    "measured network with the two directions' interference": (
        {"workers": 4, **VETH, "duplex_interference": (0.94, 0.72, 0.17)},
        True,
    ),
    "ring with transfer CPU": (
        {
            "workers": 3,
            "arch": "allreduce",
            "mode": "sync",
            "comm_cpu_s_per_byte": 2e-9,
            "host_cpu_cores": 2.0,
        },
        True,
    ),
    "co-located, transfer CPU, shared NIC": (
        {
            "workers": 4,
            "colocated_workers": 2,
            "host_cpu_cores": 4.0,
            "worker_cpu_cores": 2.0,
            "comm_cpu_s_per_byte": 5e-9,
            "flow_weight_cv": 0.2,
        },
        True,  # the host CPUs
    ),
    "co-located, NIC per worker": (
        {"workers": 4, "colocated_workers": 2, "shared_nic": False, **VETH},
        True,
    ),
    "weighted, per-worker caps, maxmin": (
        {"workers": 4, "flow_cap_bps": CAPS, "cap_mode": "maxmin", "flow_weight_cv": 0.2},
        True,
    ),
    "weighted, per-worker caps, clip": (
        {"workers": 4, "flow_cap_bps": CAPS, "cap_mode": "clip", "flow_weight_cv": 0.2},
        True,
    ),
    "ps, per-worker caps, maxmin": (
        {"workers": 4, "flow_cap_bps": CAPS, "cap_mode": "maxmin"},
        True,
    ),
    "ps, one cap below the share, transfer CPU": (
        {"workers": 4, "flow_cap_bps": 300e6, "comm_cpu_s_per_byte": 2e-9, "host_cpu_cores": 2.0},
        True,
    ),
    "fcfs, caps, maxmin": (
        {"workers": 4, "sharing": "fcfs", "flow_cap_bps": CAPS, "cap_mode": "maxmin"},
        True,
    ),
    "two servers, NIC limits": (
        {"workers": 4, "servers": 2, "worker_bandwidth_bps": 600e6, **VETH},
        True,  # the host CPUs; the network links are general
    ),
}


def run(settings: dict[str, Any]) -> SimulationResult:
    return simulate(load_trace("resnet50-b32"), SimulationConfig(**{**BASE, **settings}))


def assert_identical(fast: SimulationResult, general: SimulationResult) -> None:
    assert fast.examples_per_s == general.examples_per_s
    assert fast.replication_examples_per_s == general.replication_examples_per_s
    assert fast.simulated_time_s == general.simulated_time_s
    assert [dataclasses.astuple(s) for s in fast.links] == [
        dataclasses.astuple(s) for s in general.links
    ]
    a, b = fast.timeline, general.timeline
    assert a is not None and b is not None
    for column in ("worker", "step", "op", "slot", "start_s", "end_s", "nbytes"):
        np.testing.assert_array_equal(getattr(a, column), getattr(b, column), err_msg=column)
    assert a.steps == b.steps


@pytest.mark.parametrize("name", list(CASES))
def test_lean_paths_give_the_general_links_results_bit_for_bit(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, lean_expected = CASES[name]
    calls = 0
    lean = RateLink._replan_single

    def counting(self: RateLink) -> None:
        nonlocal calls
        calls += 1
        lean(self)

    monkeypatch.setattr(RateLink, "_replan_single", counting)
    fast = run(settings)
    assert (calls > 0) == lean_expected  # the comparison below is not vacuous
    monkeypatch.setattr(RateLink, "fast_paths", False)
    calls = 0
    general = run(settings)
    assert calls == 0
    assert_identical(fast, general)
