"""Experiment files: sections, the grid's points, errors naming file, key and value, and the
file a command line means (simcore.experiment; pure, no simulation)."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from simcore.cli.run_cmd import _NOT_IN_FILES, file_keys, simulate_parser
from simcore.errors import ConfigError
from simcore.experiment import SECTIONS, expand, experiment_toml, section_of

FLAGS = frozenset({"own-nics", "gradient-as-bucket-view"})


def doc(**sections: dict[str, Any]) -> dict[str, Any]:
    return {"workload": {"trace": "cnn-b8"}, **sections}


def test_every_simulate_option_has_one_section_or_is_about_output() -> None:
    keys, flags = file_keys(simulate_parser())
    in_sections = [key for keys_ in SECTIONS.values() for key in keys_]
    assert len(in_sections) == len(set(in_sections))  # one section each
    assert set(keys) == set(in_sections)  # none forgotten, none made up
    assert not set(in_sections) & _NOT_IN_FILES
    assert {"own-nics", "gradient-as-bucket-view"} <= flags and "workers" not in flags


def test_product_grid_in_file_order() -> None:
    points = expand(
        doc(cluster={"workers": [1, 2]}, network={"bandwidth": ["1Gbps", "10Gbps"]}),
        "e.toml",
        FLAGS,
    )
    assert [p.name for p in points] == [
        "workers=1 bandwidth=1Gbps",
        "workers=1 bandwidth=10Gbps",
        "workers=2 bandwidth=1Gbps",
        "workers=2 bandwidth=10Gbps",
    ]
    assert points[1].argv == ("cnn-b8", "--workers", "1", "--bandwidth", "10Gbps")


def test_zip_grid_pairs_the_axes_and_needs_equal_lengths() -> None:
    body = doc(cluster={"workers": [1, 2, 4]}, run={"seed": [7, 8, 9]}, grid={"combine": "zip"})
    assert [p.name for p in expand(body, "e.toml", FLAGS)] == [
        "workers=1 seed=7",
        "workers=2 seed=8",
        "workers=4 seed=9",
    ]
    body["run"]["seed"] = [7, 8]
    with pytest.raises(ConfigError, match=r'e.toml: \[grid\] combine = "zip".*workers 3, seed 2'):
        expand(body, "e.toml", FLAGS)


def test_flags_traces_of_several_types_and_overrides() -> None:
    body = doc(cluster={"own-nics": [True, False], "workers": 4})
    body["workload"] = {"trace": [["fast.json", "slow.json"]], "worker-types": "0,0,1,1"}
    points = expand(body, "e.toml", FLAGS)
    assert points[0].argv == (
        "fast.json",
        "slow.json",
        "--worker-types",
        "0,0,1,1",
        "--own-nics",
        "--workers",
        "4",
    )
    assert "--own-nics" not in points[1].argv
    # the command line's options win, and an axis overridden is an axis no more
    (only,) = expand(body, "e.toml", FLAGS, {"own-nics": True, "workers": "8"})
    assert only.name == "" and only.argv[-3:] == ("--own-nics", "--workers", "8")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"netwrok": {"bandwidth": "1Gbps"}}, r"e.toml: \[netwrok\]: not a section; the sections"),
        ({"network": {"bandwith": "1Gbps"}}, r"e.toml: \[network\] bandwith: not a key"),
        ({"network": {"arch": "ps"}}, r"e.toml: \[network\] arch: belongs in \[algorithm\]"),
        ({"cluster": {"own-nics": "yes"}}, r"\[cluster\] own-nics = yes: a flag, expected true"),
        ({"cluster": {"workers": []}}, r"\[cluster\] workers = \[\]: an axis needs"),
        ({"cluster": {"workers": {"a": 1}}}, r"workers = \{'a': 1\}: expected a string or a num"),
        ({"network": {"bandwidth": [["1Gbps"]]}}, r"bandwidth = \[\"1Gbps\"\]: expected a str"),
        ({"grid": {"combine": "cross"}}, r"\[grid\] combine = cross: expected one of product"),
        ({"grid": {"mode": "zip"}}, r"\[grid\] mode: not a key of \[grid\]"),
        ({"network": 3}, r"e.toml: network = 3: expected a \[network\] table"),
    ],
)
def test_errors_name_the_file_the_key_and_the_value(body: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        expand(doc(**body), "e.toml", FLAGS)


def test_an_experiment_needs_a_trace() -> None:
    with pytest.raises(ConfigError, match=r"e.toml: \[workload\] trace: missing"):
        expand({"cluster": {"workers": 2}}, "e.toml", FLAGS)


def test_the_file_of_values_expands_to_the_same_command() -> None:
    values = {
        "trace": "cnn-b8",
        "workers": "1,2,4",
        "bandwidth": "10Gbps",
        "arch": "ps",
        "steps": 50,
        "jitter-cv": 0.25,
        "own-nics": True,
        "network": 'odd "name".json',
    }
    text = experiment_toml(values, ["made by a test"])
    assert text.startswith('# made by a test\n\n[workload]\ntrace = "cnn-b8"\n')
    (point,) = expand(tomllib.loads(text), "e.toml", FLAGS)
    assert point.argv == (
        "cnn-b8",
        "--jitter-cv",
        "0.25",
        "--workers",
        "1,2,4",
        "--own-nics",
        "--network",
        'odd "name".json',
        "--bandwidth",
        "10Gbps",
        "--arch",
        "ps",
        "--steps",
        "50",
    )
    assert section_of("bucket-cap") == "algorithm" and section_of("json") is None
