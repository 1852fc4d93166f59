"""How a link shares transfers started together over connections kept open: the weights read
from completion times, the cv, the report's file form and a real measurement."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profilers.warm_sharing import (
    WarmRound,
    WarmSharingReport,
    measure_warm_sharing,
    share_weights,
    warm_sharing_from_dict,
    warm_sharing_text,
    warm_sharing_to_dict,
)
from simcore.errors import ConfigError


def weighted_ps_ends(weights: list[float]) -> list[float]:
    """When equal unit transfers started together end under discriminatory processor sharing of
    a unit-rate link with ``weights``: event by event, independent of the inversion."""
    left = dict(enumerate([1.0] * len(weights)))
    now, ends = 0.0, []
    while left:
        total = sum(weights[i] for i in left)
        # the next to end: least remaining work per unit of rate
        nxt = min(left, key=lambda i: left[i] * total / weights[i])
        dt = left[nxt] * total / weights[nxt]
        now += dt
        for i in list(left):
            left[i] -= dt * weights[i] / total
        del left[nxt]
        ends.append(now)
    return ends


def test_three_transfers_by_hand() -> None:
    # weights 1, 1/2, 1/4: the heaviest ends at 1.75 (it had 4/7 of the link), then the
    # second, with 1/2 left at 2/3 of the link, at 2.5, and the last alone at 3.
    assert weighted_ps_ends([1.0, 0.5, 0.25]) == pytest.approx([1.75, 2.5, 3.0])
    assert share_weights([1.75, 2.5, 3.0]) == pytest.approx((1.0, 0.5, 0.25))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=0.02, max_value=1.0), min_size=2, max_size=6))
def test_the_weights_come_back_from_the_completion_times(weights: list[float]) -> None:
    ends = weighted_ps_ends(weights)
    heaviest = max(weights)
    expected = sorted((w / heaviest for w in weights), reverse=True)
    assert share_weights(ends) == pytest.approx(expected, rel=1e-6)
    # the scale of the times does not matter (a link slower than one transfer alone suggests)
    assert share_weights([2.5 * t for t in ends]) == pytest.approx(expected, rel=1e-6)


def test_equal_ends_are_equal_weights_and_fcfs_ends_the_smallest() -> None:
    assert share_weights([4.0, 4.0, 4.0, 4.0]) == (1.0, 1.0, 1.0, 1.0)
    assert share_weights([1.0, 2.0, 3.0, 4.0]) == (1.0, 0.01, 0.01, 0.01)
    assert share_weights([0.3]) == (1.0,)


@pytest.mark.parametrize("times", [[], [0.0, 1.0], [-1.0, 2.0], [1.0, math.inf]])
def test_bad_times_are_named(times: list[float]) -> None:
    with pytest.raises(ConfigError, match="share_weights"):
        share_weights(times)


def _report(rounds: list[WarmRound]) -> WarmSharingReport:
    return WarmSharingReport(
        200e6, 2_500_000, 0.3, {"out of": 0.1, "into": 0.1}, tuple(rounds), shaped=True
    )


def test_the_cv_of_two_transfers_by_hand() -> None:
    # weights 1 and 1/2 in every round: ln w has sample variance (ln 2)^2 / 2
    ends = weighted_ps_ends([1.0, 0.5])
    report = _report([WarmRound("out of", tuple(0.1 * t for t in ends))] * 3)
    assert report.weight_cv("out of") == pytest.approx(math.sqrt(math.expm1(math.log(2) ** 2 / 2)))
    assert report.first_end("out of") == pytest.approx(1.5)
    with pytest.raises(ConfigError, match="no round"):
        report.first_end("into")
    with pytest.raises(ConfigError, match="several transfers"):
        report.weight_cv("into")


def test_equal_rounds_have_no_spread_and_directions_are_apart() -> None:
    even = WarmRound("out of", (0.4, 0.4, 0.4, 0.4))
    uneven = WarmRound("into", tuple(0.1 * t for t in weighted_ps_ends([1.0, 0.8, 0.5, 0.3])))
    report = _report([even, uneven])
    assert report.weight_cv("out of") == 0.0
    assert report.weight_cv("into") > 0.3
    assert 0 < report.weight_cv() < report.weight_cv("into")
    text = warm_sharing_text(report)
    assert "out of the node" in text and "into the node" in text and "cv 0.00" in text


def test_a_report_survives_its_dict_and_bad_ones_name_the_source() -> None:
    report = _report([WarmRound("out of", (0.3, 0.35, 0.4)), WarmRound("into", (0.2, 0.4, 0.4))])
    back = warm_sharing_from_dict(json.loads(json.dumps(warm_sharing_to_dict(report))), "f.json")
    assert back == report
    data = warm_sharing_to_dict(report)
    for bad, match in (
        ({k: v for k, v in data.items() if k != "rounds"}, "f.json: warm sharing: missing"),
        ({**data, "rounds": [{"direction": "sideways", "completion_s": [0.1]}]}, "sideways"),
        ({**data, "rounds": [{"direction": "into", "completion_s": [0.0, 0.1]}]}, "positive"),
        ({**data, "nbytes": "many"}, "f.json: warm sharing"),
    ):
        with pytest.raises(ConfigError, match=match):
            warm_sharing_from_dict(bad, "f.json")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"flows": 1}, "flows must be >= 2"),
        ({"rounds": 0}, "rounds must be >= 1, got 0"),
        ({"gap_s": -1.0}, "gap must be >= 0 s, got -1.0"),
        ({"nbytes": 0}, "bytes must be >= 1, got 0"),
        ({"timeout_s": 0.0}, "timeout must be > 0 s"),
    ],
)
def test_bad_arguments_are_named_before_anything_starts(
    kwargs: dict[str, float], message: str
) -> None:
    with pytest.raises(ConfigError, match=f"warm sharing: {message}"):
        measure_warm_sharing(100e6, shaped=False, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="warm sharing: rate must be > 0"):
        measure_warm_sharing(0.0, nbytes=1000, shaped=False)


@pytest.mark.slow
def test_on_loopback_every_round_is_timed() -> None:
    report = measure_warm_sharing(100e6, nbytes=200_000, flows=3, rounds=3, gap_s=0.0, shaped=False)
    assert [r.direction for r in report.rounds] == ["into"] * 3 + ["out of"] * 3
    assert all(r.flows == 3 and 0 < r.completion_s[0] <= r.completion_s[-1] for r in report.rounds)
    assert set(report.alone_s) == {"into", "out of"}
    assert report.weight_cv() >= 0.0


@pytest.mark.slow
def test_on_a_shaped_link_two_transfers_share_it(root_only: None) -> None:
    # (root_only also checks that the cluster's namespaces are gone afterwards)
    rate = 100e6
    report = measure_warm_sharing(rate, nbytes=250_000, flows=2, rounds=4, gap_s=0.05)
    for direction in ("into", "out of"):
        # one transfer alone at most the shaped rate; two together take the link's time for both
        assert report.alone_s[direction] >= 250_000 * 8 / rate
        last = [r.completion_s[-1] for r in report.rounds if r.direction == direction]
        assert min(last) >= 2 * 250_000 * 8 / rate * 0.9
        assert 0.5 <= report.first_end(direction) <= 2.2
