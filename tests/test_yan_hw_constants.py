"""The micro-benchmark of the Yan et al. hardware constants returns sane figures."""

from __future__ import annotations

import math

import torch

from profilers.hw_constants import measure_hardware_constants


def test_measured_constants_are_positive_finite_and_plausible() -> None:
    threads_before = torch.get_num_threads()
    hw = measure_hardware_constants(max_threads=2, matmul_size=128, vector_size=1 << 16)
    assert torch.get_num_threads() == threads_before  # restored
    assert 1e-13 < hw.muladd_s < 1e-7
    assert 1e-12 < hw.act_s < 1e-6
    assert 1e-12 < hw.err_s < 1e-6
    assert hw.interference[0] == 1.0 and len(hw.interference) == 2
    assert math.isfinite(hw.interference[1]) and hw.interference[1] > 0
    assert hw.bandwidth_bps == 10e9 and hw.latency_s == 50e-6  # passed through


def test_network_figures_are_passed_through() -> None:
    hw = measure_hardware_constants(
        max_threads=1, latency_s=1e-3, bandwidth_bps=1e8, matmul_size=64, vector_size=1 << 12
    )
    assert (hw.latency_s, hw.bandwidth_bps, hw.interference) == (1e-3, 1e8, (1.0,))
