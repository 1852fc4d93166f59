"""The one saturation rule (simcore.saturation) on hand-made curves."""

from __future__ import annotations

import pytest

from simcore.saturation import saturation_point


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([10, 19, 30, 31, 31.5], 3),  # 30 >= 0.95 * 31.5 > 19
        ([10, 20, 30, 40], None),  # still climbing at the last W
        ([10, 12, 11], 2),  # the best is in the middle
        ([10, 9.6, 9], 1),  # never better than one worker
        ([10], None),  # one point is no curve
    ],
)
def test_fewest_workers_within_five_percent_of_the_best(
    values: list[float], expected: int | None
) -> None:
    assert saturation_point(list(range(1, len(values) + 1)), values) == expected


def test_uneven_worker_counts_and_a_custom_share() -> None:
    assert saturation_point([1, 2, 4, 8, 16], [1, 2, 3.5, 3.9, 4.0]) == 8
    assert saturation_point([1, 2, 4, 8, 16], [1, 2, 3.5, 3.9, 4.0], share=0.8) == 4
    with pytest.raises(ValueError, match="3 worker counts but 2"):
        saturation_point([1, 2, 3], [1.0, 2.0])
