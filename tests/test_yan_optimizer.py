"""The polynomial search (greedy mapping + DP) finds the exhaustive search's optimum."""

from __future__ import annotations

import numpy as np
import pytest

from simcore.analytic.yan import (
    Configuration,
    HardwareConstants,
    Layer,
    Network,
    SearchSpace,
    epoch_time,
    exhaustive_search,
    mnist,
    polynomial_search,
)
from simcore.analytic.yan.optimizer import _dp, _plans
from simcore.errors import ConfigError

SEEDS = range(16)


def random_network(rng: np.random.Generator, n_layers: int) -> Network:
    layers = tuple(
        Layer(
            f"l{i}",
            "fc" if rng.random() < 0.5 else "conv",
            neurons=int(rng.integers(10, 5000)),
            connections=int(rng.integers(100, 1_000_000)),
            weights=int(rng.integers(10, 100_000)),
            receptive_fraction=float(rng.uniform(0.05, 0.8)),
        )
        for i in range(n_layers)
    )
    return Network("random", layers, samples_per_epoch=1000)


def random_hardware(rng: np.random.Generator) -> HardwareConstants:
    return HardwareConstants(
        muladd_s=float(rng.uniform(1e-10, 1e-8)),
        act_s=float(rng.uniform(1e-9, 1e-7)),
        err_s=float(rng.uniform(1e-9, 1e-7)),
        interference=(1.0, float(rng.uniform(1.0, 2.5))),
        latency_s=float(rng.uniform(0, 1e-4)),
        bandwidth_bps=float(rng.uniform(1e8, 1e10)),
    )


def instance(seed: int) -> tuple[Network, HardwareConstants, SearchSpace]:
    rng = np.random.default_rng(seed)
    machines = int(rng.integers(2, 5))
    n_layers = int(rng.integers(1, 3 if machines == 4 else 4))  # keeps brute force < 2 s
    network = random_network(rng, n_layers)
    space = SearchSpace(machines=machines, read_bound=float(rng.uniform()))
    return network, random_hardware(rng), space


@pytest.mark.parametrize("seed", SEEDS)
def test_both_searches_find_the_same_optimal_epoch(seed: int) -> None:
    network, hw, space = instance(seed)
    brute = exhaustive_search(network, hw, space)
    fast = polynomial_search(network, hw, space)
    assert fast.epoch_s == pytest.approx(brute.epoch_s, rel=1e-9)
    # The answer is a valid configuration whose modelled epoch is the one reported.
    assert epoch_time(network, hw, fast.config).epoch_s == pytest.approx(fast.epoch_s)
    used = fast.config.n_ps + fast.config.n_mr * fast.config.n_wr
    assert used <= space.machines


@pytest.mark.slow
def test_five_machines_two_layers_agree() -> None:
    # Up to four workers per replica: stripes of 1..4 against 1..4 with layer replicas.
    rng = np.random.default_rng(2015)
    network, hw = random_network(rng, 2), random_hardware(rng)
    space = SearchSpace(machines=5, threads=(1,), resources=((1, 1, 4), (1, 2, 2)))
    brute = exhaustive_search(network, hw, space)
    assert polynomial_search(network, hw, space).epoch_s == pytest.approx(brute.epoch_s)


@pytest.mark.parametrize("seed", range(4))
def test_the_dp_value_is_the_models_epoch_of_its_plans(seed: int) -> None:
    network, hw, _ = instance(100 + seed)
    base = Configuration(n_ps=1, n_mr=2, n_wr=3, plans=(), read_bound=0.3)
    value, plans, _ = _dp(network, hw, base, _plans(3, (1, 2)))
    config = Configuration(1, 2, 3, plans, read_bound=0.3)
    assert epoch_time(network, hw, config).epoch_s == pytest.approx(value, rel=1e-12)


def test_a_compute_bound_single_layer_takes_every_machine() -> None:
    # Free network: the best is one PS and as many replicas and threads as possible.
    network = Network("one", (Layer("x", "fc", 10, 10_000, 10),), samples_per_epoch=100)
    hw = HardwareConstants(1e-9, 1e-9, 1e-9, (1.0, 1.0), 0.0, 1e15)
    best = polynomial_search(network, hw, SearchSpace(machines=4))
    # Partitions, layer replicas and model replicas all split the work 3 ways here: ties.
    assert best.config.n_ps + best.config.n_mr * best.config.n_wr == 4
    assert best.epoch_s == pytest.approx((1e-5 + 1e-8 + 1e-5) * 100 / 6, rel=1e-3)


def test_the_paper_network_search_is_fast_and_sane() -> None:
    space = SearchSpace(machines=8, threads=(1, 4, 16), resources=((2, 3, 2), (1, 7, 1)))
    hw = HardwareConstants(4e-10, 5e-9, 5e-9, tuple(1.0 + 0.01 * h for h in range(16)), 5e-5, 1e10)
    best = polynomial_search(mnist(), hw, space)
    assert best.epoch_s > 0 and len(best.config.plans) == len(mnist().layers)


@pytest.mark.parametrize(
    ("space", "culprit"),
    [
        (SearchSpace(machines=1), "machines = 1"),
        (SearchSpace(machines=4, threads=(3,)), r"threads \[3\]"),
        (SearchSpace(machines=4, resources=((1, 2, 2),)), r"resources \(1, 2, 2\)"),
        (SearchSpace(machines=4, read_bound=-0.1), "read_bound = -0.1"),
    ],
)
def test_bad_search_space_names_the_field(space: SearchSpace, culprit: str) -> None:
    network, hw, _ = instance(0)
    with pytest.raises(ConfigError, match=culprit):
        polynomial_search(network, hw, space)


@pytest.mark.slow
def test_four_machines_three_layers_agree() -> None:
    # The largest brute force here (about 5 s): 3 layers, mappings onto up to 3 workers.
    rng = np.random.default_rng(7)
    network, hw = random_network(rng, 3), random_hardware(rng)
    space = SearchSpace(machines=4, read_bound=0.7)
    brute = exhaustive_search(network, hw, space)
    assert polynomial_search(network, hw, space).epoch_s == pytest.approx(brute.epoch_s)
