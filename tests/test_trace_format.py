"""The trace format: round trip, validation errors that name the culprit, graph views."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from simcore.errors import ConfigError, TraceError
from simcore.trace import OpKind, Resource, step_graph, trace_from_dict, trace_to_dict
from simcore.trace.build import synthetic_trace
from simcore.trace.graph import critical_path
from simcore.trace.io import load_trace, save_trace


@pytest.fixture()
def doc() -> dict[str, Any]:
    trace = synthetic_trace(
        [[0.001, 0.002, 0.003], [0.0011, 0.0021, 0.0031]],
        [[0.002, 0.004, 0.001], [0.0021, 0.0041, 0.0011]],
        [4000, 0, 800],
        update_s=0.0005,
        model_name="tiny",
        batch_size=8,
    )
    return trace_to_dict(trace)


def op_index(doc: dict[str, Any], op_id: str) -> int:
    return next(i for i, op in enumerate(doc["ops"]) if op["id"] == op_id)


def test_round_trip_is_lossless(doc: dict[str, Any], tmp_path: Path) -> None:
    trace = trace_from_dict(doc, "doc")
    path = save_trace(trace, tmp_path / "t.json")
    again = load_trace(path)
    assert trace_to_dict(again) == doc
    assert again.metadata.batch_size == 8
    assert again.n_steps == 2
    assert again.param_nbytes == 4800


def test_save_refuses_to_overwrite(doc: dict[str, Any], tmp_path: Path) -> None:
    trace = trace_from_dict(doc, "doc")
    path = save_trace(trace, tmp_path / "t.json")
    with pytest.raises(ConfigError, match="already exists"):
        save_trace(trace, path)
    save_trace(trace, path, overwrite=True)
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]  # no temporary file left behind


def expect_error(doc: dict[str, Any], *fragments: str) -> None:
    with pytest.raises(TraceError) as info:
        trace_from_dict(doc, "bad.json")
    message = str(info.value)
    assert message.startswith("bad.json: ")
    for fragment in fragments:
        assert fragment in message, message


def test_unknown_schema_version_names_the_supported_ones(doc: dict[str, Any]) -> None:
    doc["schema_version"] = 7
    expect_error(doc, "schema_version", "7", "reads version(s) 1", "sgdsim profile")


def test_not_an_sgdsim_trace(doc: dict[str, Any]) -> None:
    doc["schema"] = "chrome.trace"
    expect_error(doc, "'schema'", "chrome.trace")


def test_dangling_dependency(doc: dict[str, Any]) -> None:
    i = op_index(doc, "forward:l1")
    doc["ops"][i]["deps"] = ["forward:l0", "pull:l9"]
    expect_error(doc, f"ops[{i}] 'forward:l1'", "'deps'", "'pull:l9'", "not an op")


def test_cyclic_dependencies_are_shown(doc: dict[str, Any]) -> None:
    doc["ops"][op_index(doc, "forward:l0")]["deps"].append("forward:l2")
    expect_error(doc, "cycle", "forward:l0", "forward:l2")


@pytest.mark.parametrize("value", [-0.001, math.nan, math.inf, "fast"])
def test_bad_durations(doc: dict[str, Any], value: Any) -> None:
    doc["steps"][1]["duration_s"][op_index(doc, "backward:l1")] = value
    expect_error(doc, "steps[1]", "'backward:l1'", "duration_s", repr(value))


def test_nan_from_a_json_file_is_rejected(doc: dict[str, Any], tmp_path: Path) -> None:
    doc["steps"][0]["duration_s"][op_index(doc, "forward:l0")] = math.nan
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(doc))  # Python writes NaN as a bare token
    with pytest.raises(TraceError, match=r"nan.json: steps\[0\] op 'forward:l0'.*nan"):
        load_trace(path)


def test_computation_op_without_duration(doc: dict[str, Any]) -> None:
    doc["steps"][0]["duration_s"][op_index(doc, "update:l2")] = None
    expect_error(doc, "'update:l2'", "needs a measured duration_s")


@pytest.mark.parametrize("nbytes", [None, 0, -5, 1.5])
def test_communication_op_without_bytes(doc: dict[str, Any], nbytes: Any) -> None:
    i = op_index(doc, "push:l0")
    if nbytes is None:
        del doc["ops"][i]["nbytes"]
    else:
        doc["ops"][i]["nbytes"] = nbytes
    expect_error(doc, "'push:l0'", "uplink", "'nbytes'", repr(nbytes))


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        (("metadata", "batch_size"), "missing required field 'batch_size'"),
        (("metadata", "model_name"), "missing required field 'model_name'"),
        (("ops", 0, "resource"), "missing required field 'resource'"),
        (("layers", 0, "params", 0, "nbytes"), "missing required field 'nbytes'"),
        (("steps", 0, "duration_s"), "missing required field 'duration_s'"),
        (("metadata",), "missing required field 'metadata'"),
    ],
)
def test_missing_fields(doc: dict[str, Any], path: tuple[Any, ...], fragment: str) -> None:
    node: Any = doc
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    expect_error(doc, fragment)


def test_unknown_resource_lists_the_allowed(doc: dict[str, Any]) -> None:
    doc["ops"][0]["resource"] = "gpu"
    expect_error(doc, "ops[0]", "'gpu'", "'downlink'", "'worker'", "'uplink'", "'ps'")


def test_kind_on_wrong_resource(doc: dict[str, Any]) -> None:
    i = op_index(doc, "forward:l0")
    doc["ops"][i]["resource"] = "ps"
    expect_error(doc, "'forward:l0'", "must use resource worker")


def test_step_length_mismatch(doc: dict[str, Any]) -> None:
    doc["steps"][0]["duration_s"].pop()
    expect_error(doc, "steps[0]", "expected one per op")


def test_profiled_steps_must_match(doc: dict[str, Any]) -> None:
    doc["metadata"]["profiled_steps"] = 5
    expect_error(doc, "profiled_steps", "holds 2 steps")


def test_unreadable_and_non_json_files(tmp_path: Path) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text("{not json")
    with pytest.raises(TraceError, match=r"broken.json: not valid JSON \(line 1"):
        load_trace(bad)
    with pytest.raises(ConfigError, match="no such file, and not a shipped sample"):
        load_trace(tmp_path / "missing.json")


def test_inputs_are_not_mutated(doc: dict[str, Any]) -> None:
    before = copy.deepcopy(doc)
    trace_from_dict(doc, "doc")
    assert doc == before


def test_graph_view_of_a_residual_block() -> None:
    # l0 -> l1 -> l2, and l0 -> l2 (skip connection): l2 joins both.
    trace = synthetic_trace(
        [1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [8, 8, 0], inputs={"l1": ["l0"], "l2": ["l0", "l1"]}
    )
    graph = step_graph(trace)
    assert nx.is_directed_acyclic_graph(graph)
    assert graph.has_edge("forward:l0", "forward:l2")  # the skip branch
    assert graph.has_edge("forward:l1", "forward:l2")
    assert graph.has_edge("backward:l2", "backward:l0")  # reversed in backward
    assert graph.has_edge("backward:l1", "backward:l0")
    assert graph.has_edge("pull:l0", "forward:l0")
    assert graph.has_edge("backward:l1", "push:l1")
    assert graph.has_edge("push:l1", "update:l1")
    assert graph.nodes["push:l1"]["resource"] is Resource.UPLINK
    assert "pull:l2" not in graph  # parameter-free layers move no bytes


def test_critical_path_of_a_chain() -> None:
    trace = synthetic_trace([1.0, 2.0], [3.0, 4.0], [100, 100], update_s=0.5)
    cost = [d if d is not None else 10.0 for d in trace.steps[0].duration_s]
    path, length = critical_path(trace, cost)
    # pull l0 (10), fwd l0 (1), fwd l1 (2), bwd l1 (4), bwd l0 (3), push l0 (10), update (0.5)
    assert path == [
        "pull:l0",
        "forward:l0",
        "forward:l1",
        "backward:l1",
        "backward:l0",
        "push:l0",
        "update:l0",
    ]
    assert length == pytest.approx(30.5)


def test_strict_phases_make_forward_wait_for_every_pull() -> None:
    trace = synthetic_trace([1.0, 1.0], [1.0, 1.0], [8, 8], overlap=False)
    graph = step_graph(trace)
    assert set(graph.predecessors("forward:l0")) == {"pull:l0", "pull:l1"}
    assert set(graph.predecessors("push:l1")) == {"backward:l0", "backward:l1"}
    assert [op.kind for op in trace.ops][:2] == [OpKind.PULL, OpKind.PULL]
