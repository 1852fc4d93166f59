"""Hand-computed values of the Yan et al. (KDD'15) model terms, and its input validation."""

from __future__ import annotations

import dataclasses
import importlib
import re

import pytest

from simcore.analytic.yan import (
    Configuration,
    HardwareConstants,
    Layer,
    LayerPlan,
    Network,
    epoch_time,
    imagenet22k,
    mnist,
)
from simcore.errors import ConfigError

# Round numbers so that every term can be worked out by hand.
HW = HardwareConstants(
    muladd_s=1e-9,
    act_s=1e-8,
    err_s=2e-8,
    interference=(1.0, 1.5),
    latency_s=1e-4,
    bandwidth_bps=1e9,
    bits_per_value=32,
)
FC = Network(
    "two-fc",
    (Layer("a", "fc", 100, 1000, 1000), Layer("b", "fc", 10, 1000, 1000)),
    samples_per_epoch=1000,
)


def config(plans: tuple[LayerPlan, ...], **kw: object) -> Configuration:
    base = {"n_ps": 1, "n_mr": 1, "n_wr": 2, "read_every_samples": 10, "read_bound": 0.0}
    base.update(kw)
    return Configuration(plans=plans, **base)  # type: ignore[arg-type]


def test_the_subpackage_imports() -> None:
    assert importlib.import_module("simcore.analytic.yan").epoch_time is epoch_time


def test_one_worker_one_thread_by_hand() -> None:
    result = epoch_time(FC, HW, config((LayerPlan(), LayerPlan()), n_wr=1))
    # Layer a: U_f = 1e-9 * 1000 + 1e-8 * 100 = 2e-6; U_b = 1e-9 * 1000 (layer b's
    # connections) + 2e-8 * 100 = 3e-6; U_w = 1e-6. Layer b: U_f = 1e-6 + 1e-7,
    # U_b = 0 + 2e-7, U_w = 1e-6. Nothing is partitioned: no messages.
    assert result.u_f_s == pytest.approx((2e-6, 1.1e-6))
    assert result.u_b_s == pytest.approx((3e-6, 2e-7))
    assert result.u_w_s == pytest.approx((1e-6, 1e-6))
    assert result.m_f_s == (0.0, 0.0) and result.m_b_s == (0.0, 0.0)
    # Reads: each layer 1e-4 + 1000 weights * 32 bits / 1e9 = 1.32e-4; both bounds agree for
    # one replica and one server.
    assert result.m_w_min_s == pytest.approx(2.64e-4)
    assert result.m_w_max_s == pytest.approx(2.64e-4)
    layers_s = (6e-6 + 2.3e-6) * 1000
    assert result.read_s == pytest.approx(2.64e-4 * 1000 / 10)
    assert result.epoch_s == pytest.approx(layers_s + 2.64e-2)


def test_partitioned_fc_layers_exchange_activations_and_errors() -> None:
    plans = (LayerPlan(partitions=2), LayerPlan(partitions=2))
    result = epoch_time(FC, HW, config(plans))
    # Each half of b needs all 100 activations of a and holds 50: 50 remote values.
    assert result.m_f_s[1] == pytest.approx(1e-4 + 50 * 32 / 1e9)
    # Each half of a needs the error terms of all 10 neurons of b and holds 5.
    assert result.m_b_s[0] == pytest.approx(1e-4 + 5 * 32 / 1e9)
    assert result.u_f_s[0] == pytest.approx(1e-6)  # half the work of the unpartitioned layer


def test_threads_multiply_computation_and_share_the_nic() -> None:
    plans = (LayerPlan(2, threads=2), LayerPlan(2, threads=2))
    one = epoch_time(FC, HW, config((LayerPlan(2), LayerPlan(2))))
    two = epoch_time(FC, HW, config(plans))
    assert two.u_f_s[0] == pytest.approx(1.5 * one.u_f_s[0])  # C_interf(2) = 1.5 (Eq. 9)
    assert two.m_f_s[1] == pytest.approx(1e-4 + 2 * 50 * 32 / 1e9)  # bandwidth / H
    assert two.parallelism == (2, 2)


def test_read_bounds_eq_10_and_11() -> None:
    plans = (LayerPlan(), LayerPlan())
    kw = {"n_ps": 3, "n_mr": 4, "n_wr": 2, "read_bound": 0.25}
    result = epoch_time(FC, HW, config(plans, **kw))
    transfer_s = 1000 * 32 / 1e9
    assert result.m_w_max_s == pytest.approx(2 * (1e-4 + 4 * transfer_s))  # N_mr W(l)
    assert result.m_w_min_s == pytest.approx(2 * (1e-4 + transfer_s / 2))  # min(N_ps, N_wr)
    assert result.m_w_s == pytest.approx(
        result.m_w_min_s + 0.25 * (result.m_w_max_s - result.m_w_min_s)
    )
    assert result.parallelism == (4, 4)  # Q = H R N_mr


def test_convolution_stripes_read_only_a_halo() -> None:
    conv = Network(
        "convs",
        (
            Layer("c1", "conv", 1000, 10_000, 100, receptive_fraction=0.2),
            Layer("c2", "conv", 1000, 10_000, 100, receptive_fraction=0.2),
        ),
        samples_per_epoch=10,
    )
    result = epoch_time(conv, HW, config((LayerPlan(2), LayerPlan(2))))
    # A half of c2 needs the rows of c1 within 0.1 of it: 0.1 of them are remote.
    assert result.m_f_s[1] == pytest.approx(1e-4 + 100 * 32 / 1e9)


def test_replicated_layer_reads_its_own_weights() -> None:
    plans = (LayerPlan(), LayerPlan(replicas=2))
    result = epoch_time(FC, HW, config(plans, n_wr=2))
    transfer_s = 1000 * 32 / 1e9
    assert result.m_w_max_s == pytest.approx(2e-4 + 3 * transfer_s)
    assert result.parallelism == (1, 2)


@pytest.mark.parametrize(
    ("change", "culprit"),
    [
        ({"n_ps": 0}, "n_ps = 0"),
        ({"read_bound": 1.5}, "read_bound = 1.5"),
        ({"plans": (LayerPlan(3), LayerPlan())}, "plans[0]: partitions * replicas = 3"),
        ({"plans": (LayerPlan(threads=3), LayerPlan())}, "plans[0].threads = 3"),
        ({"plans": (LayerPlan(),)}, "plans has 1 entries"),
        ({"mapping": ((0,), (0, 0))}, "mapping[1] = (0, 0)"),
    ],
)
def test_bad_configuration_names_the_field(change: dict[str, object], culprit: str) -> None:
    good = config((LayerPlan(), LayerPlan(2)))
    with pytest.raises(ConfigError, match=re.escape(culprit)):
        epoch_time(FC, HW, dataclasses.replace(good, **change))  # type: ignore[arg-type]


def test_bad_layer_and_hardware_name_the_field() -> None:
    bad = Network("n", (Layer("x", "fc", 0, 1, 1),), 1)
    with pytest.raises(ConfigError, match=r"layer 0 \('x'\): neurons = 0"):
        epoch_time(bad, HW, config((LayerPlan(),)))
    with pytest.raises(ConfigError, match="bandwidth_bps = -1"):
        epoch_time(FC, dataclasses.replace(HW, bandwidth_bps=-1.0), config((LayerPlan(),) * 2))


def test_builtin_networks_match_the_papers_outline() -> None:
    small, large = mnist(), imagenet22k()
    assert [layer.kind for layer in small.layers] == ["conv"] * 2 + ["fc"] * 3
    assert [layer.kind for layer in large.layers] == ["conv"] * 5 + ["fc"] * 3
    assert 2.4e6 < sum(layer.connections for layer in small.layers) < 2.7e6  # "about 2.5 M"
    assert sum(layer.connections for layer in large.layers) > 2e9  # "over 2 billion"
    assert small.layers[-1].neurons == 10 and large.layers[-1].neurons == 22_000
