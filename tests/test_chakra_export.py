"""MLCommons Chakra execution traces of a simulated step (``simcore.export.chakra``).

Each run is written, read back with the vendored schema and checked against the simulator's own
record of the step: one ``<prefix>.<rank>.et`` per rank, GlobalMetadata first; a node per
simulated op of the step (latency, joins, readiness and rendezvous folded out; a ring's messages
one collective); collectives of the layers' or buckets' bytes; sends and receives that pair up
between workers and servers; dependencies inside the rank and acyclic; durations to the
microsecond. Skipped without protobuf (the ``chakra`` extra).
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

pytest.importorskip("google.protobuf")

from google.protobuf.internal.decoder import _DecodeVarint32

from simcore.errors import ConfigError
from simcore.export import chakra
from simcore.export.chakra import SCHEMA_VERSION, chakra_ranks
from simcore.export.chakra_files import check_chakra_dir, read_chakra_file, write_chakra_dir
from simcore.export.chrome import resource_base, server_of
from simcore.sim import SimulationConfig, SimulationResult, simulate
from simcore.sim.ddp_dag import ddp_buckets, wire_nbytes
from simcore.trace.build import synthetic_trace
from simcore.trace.io import load_trace
from simcore.trace.model import Trace

pb = chakra.schema()
SCHEMA_DIR = Path(chakra.__file__).parent / "chakra_schema"
TRACES = Path(chakra.__file__).parent.parent / "data" / "traces"
FOLDED = ("latency", "rendezvous")
HALF_US = 0.5 + 1e-6  # a duration rounded to the microsecond, with float slack


def tiny() -> Trace:
    return synthetic_trace(
        [[0.002, 0.004, 0.001], [0.003, 0.005, 0.001]],
        [[0.004, 0.006, 0.002], [0.005, 0.007, 0.002]],
        [400_000, 0, 200_000],  # a parameter-free layer in between
        update_s=0.0005,
        batch_size=16,
    )


def shipped(name: str) -> Trace:
    return load_trace(TRACES / f"{name}-b32.json")


def run(trace: Trace, **kwargs: Any) -> SimulationResult:
    config = dict(bandwidth_bps=1e9, steps=6, warmup_steps=1, batches=3, seed=1, timeline=True)
    return simulate(trace, SimulationConfig(**{**config, **kwargs}))


CASES = [
    ("tiny", dict(arch="ps", mode="sync", workers=2)),
    ("tiny", dict(arch="ps", mode="async", workers=3, latency_s=1e-4)),
    ("tiny", dict(arch="ps", mode="sync", workers=4, servers=2, parse_beta_s=1e-5)),
    ("tiny", dict(arch="allreduce", mode="sync", workers=2)),
    ("tiny", dict(arch="allreduce", mode="sync", workers=3, latency_s=1e-5)),
    ("tiny", dict(arch="allreduce", mode="sync", workers=4, ring_segment_bytes=50_000)),
    ("tiny", dict(arch="ddp", mode="sync", workers=2)),
    ("tiny", dict(arch="ddp", mode="sync", workers=4, bucket_cap_bytes=300_000, latency_s=1e-5)),
    ("cnn", dict(arch="ps", mode="async", workers=3, servers=2)),
    ("resnet18", dict(arch="ps", mode="sync", workers=2)),
    ("resnet18", dict(arch="ddp", mode="sync", workers=3)),
    ("cnn", dict(arch="ps", mode="sync", workers=2, devices_per_host=2, intra_bandwidth_bps=1e10)),
    (
        "cnn",
        dict(
            arch="allreduce",
            mode="sync",
            workers=3,
            parse_placement="pipelined",
            parse_alpha_s_per_byte=1e-10,
            latency_s=1e-5,
        ),
    ),
    (
        "cnn",
        dict(
            arch="ddp",
            mode="sync",
            workers=4,
            bucket_cap_bytes=200_000,
            first_bucket_bytes=100_000,
            ddp_compression="fp16",
        ),
    ),
]


def attrs(message: Any) -> dict[str, Any]:
    return {a.name: getattr(a, a.WhichOneof("value")) for a in message.attr}


def base_id(op_id: str) -> str:
    head, sep, tail = op_id.rpartition("#")
    return head if sep and tail.isdigit() else op_id


def expected_nodes(
    result: SimulationResult, step: int
) -> dict[int, dict[str, tuple[float, float]]]:
    """Rank -> node name -> (start, end) s, from the timeline of ``step`` (the module's model)."""
    config = result.config
    timeline = result.timeline
    assert timeline is not None
    out: dict[int, dict[str, tuple[float, float]]] = defaultdict(dict)
    for rec in timeline:
        if rec.step != step or resource_base(rec.resource) in FOLDED:
            continue
        base = resource_base(rec.resource)
        places = []
        if config.is_collective:
            places.append((rec.worker, base_id(rec.op) if base == "uplink" else rec.op))
        else:
            server = config.workers + server_of(rec.resource)
            if base != "ps":
                places.append((rec.worker, rec.op))
            if base in ("ps", "downlink", "uplink"):
                places.append((server, f"{rec.op} (worker {rec.worker})"))
        for rank, name in places:
            start, end = out[rank].get(name, (rec.start_s, rec.end_s))
            out[rank][name] = (min(start, rec.start_s), max(end, rec.end_s))
    return out


def export(tmp_path: Path, trace: Trace, **kwargs: Any) -> tuple[SimulationResult, list[Any]]:
    result = run(trace, **kwargs)
    ranks = chakra_ranks(result, trace)
    paths = write_chakra_dir(tmp_path / "et", ranks)
    assert paths == [tmp_path / "et" / f"sgdsim.{r}.et" for r in range(len(ranks))]
    assert sorted(p.name for p in (tmp_path / "et").iterdir()) == sorted(p.name for p in paths)
    read = [read_chakra_file(p) for p in paths]
    for (meta, nodes), rank in zip(read, ranks, strict=True):  # the same messages came back
        assert meta == rank.metadata and nodes == list(rank.nodes)
    return result, read


@pytest.mark.parametrize(
    ("name", "kwargs"),
    CASES,
    ids=[f"{n}-{k['arch']}-{k['mode']}-W{k['workers']}" for n, k in CASES],
)
def test_export_matches_the_simulated_step(tmp_path: Path, name: str, kwargs: Any) -> None:
    trace = tiny() if name == "tiny" else shipped(name)
    result, read = export(tmp_path, trace, **kwargs)
    config = result.config
    servers = 0 if config.is_collective else config.servers
    assert len(read) == config.workers + servers
    step = attrs(read[0][0])["step"]
    assert config.warmup_steps <= step < config.steps  # a measured step by default
    expected = expected_nodes(result, step)
    for rank, (meta, nodes) in enumerate(read):
        check_metadata(meta, rank, config, servers)
        check_graph(nodes)
        origin_us = attrs(meta)["time_origin_s"] * 1e6
        times = expected[rank]
        assert sorted(n.name for n in nodes) == sorted(times)  # one node per simulated op
        names = [n.name for n in nodes]
        for node in nodes:
            start, end = times[node.name]
            for dep in node.data_deps:  # a node starts no earlier than what it waits for
                assert times[names[dep]][0] <= start
            for dep in node.ctrl_deps:  # the resource ran them one after the other
                assert times[names[dep]][1] <= start
            assert abs(node.duration_micros - (end - start) * 1e6) <= HALF_US
            assert abs(node.start_time_micros - (start * 1e6 - origin_us)) <= HALF_US
            assert attrs(node)["is_cpu_op"] is False
    if config.is_collective:
        check_collectives(read, trace, config)
    else:
        check_pairs(read, config.workers)


def check_metadata(meta: Any, rank: int, config: SimulationConfig, servers: int) -> None:
    values = attrs(meta)
    assert meta.version == SCHEMA_VERSION
    assert values["producer"].startswith("sgdsim ")
    assert values["rank"] == rank
    assert values["role"] == ("worker" if rank < config.workers else "server")
    assert values["world_size"] == config.workers + servers
    assert (values["workers"], values["servers"]) == (config.workers, servers)
    assert (values["arch"], values["mode"]) == (config.arch, config.mode)
    assert values["bandwidth_bps"] == config.bandwidth_bps


def check_graph(nodes: list[Any]) -> None:
    """Ids 0..n-1 in file order, deps inside the rank and earlier in the file, acyclic."""
    assert [n.id for n in nodes] == list(range(len(nodes)))
    graph = nx.DiGraph()
    graph.add_nodes_from(n.id for n in nodes)
    for node in nodes:
        for dep in [*node.data_deps, *node.ctrl_deps]:
            assert 0 <= dep < node.id  # exists in this rank; the file is topological
            graph.add_edge(dep, node.id)
        assert not set(node.data_deps) & set(node.ctrl_deps)
    assert nx.is_directed_acyclic_graph(graph)


def check_collectives(read: list[Any], trace: Trace, config: SimulationConfig) -> None:
    if config.arch == "ddp":
        buckets = ddp_buckets(trace, config)
        sizes = sorted(round(wire_nbytes(b, config.ddp_compression)) for b in buckets)
    else:
        sizes = sorted(op.nbytes or 0 for op in trace.ops if op.resource.value == "uplink")
        assert sum(sizes) == trace.param_nbytes
    for _, nodes in read:
        colls = [attrs(n) for n in nodes if n.type == pb.COMM_COLL_NODE]
        assert all(a["comm_type"] == pb.ALL_REDUCE for a in colls)
        assert sorted(a["comm_size"] for a in colls) == sizes
        assert not [n for n in nodes if n.type in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE)]


def check_pairs(read: list[Any], workers: int) -> None:
    """Every send has its receive on the other rank: same src, dst, tag and size; tags tell the
    messages of a pair of ranks apart."""
    ends: dict[int, dict[tuple[int, int, int], int]] = {
        pb.COMM_SEND_NODE: {},
        pb.COMM_RECV_NODE: {},
    }
    for rank, (_, nodes) in enumerate(read):
        for node in nodes:
            if node.type not in ends:
                continue
            a = attrs(node)
            src, dst = a["comm_src"], a["comm_dst"]
            assert rank == (src if node.type == pb.COMM_SEND_NODE else dst)
            assert (src < workers) != (dst < workers)  # between a worker and a server
            assert a["comm_size"] > 0
            key = (src, dst, a["comm_tag"])
            assert key not in ends[node.type]
            ends[node.type][key] = a["comm_size"]
    assert ends[pb.COMM_SEND_NODE]
    assert ends[pb.COMM_SEND_NODE] == ends[pb.COMM_RECV_NODE]


def test_dependencies_are_the_dags_through_folded_ops() -> None:
    """Latency between a pull and its forward, and DDP's readiness and rendezvous, are folded:
    their dependents wait for what they waited for."""
    trace = tiny()
    ranks = chakra_ranks(run(trace, workers=2, arch="ps", mode="sync", latency_s=1e-4), trace)
    assert deps_by_name(ranks[0])["forward:l0"] == ({"pull:l0"}, set())
    assert deps_by_name(ranks[0])["push:l2"] == ({"backward:l2"}, set())
    server = deps_by_name(ranks[2])
    assert server["update:l0 (worker 1)"][0] == {"push:l0 (worker 1)"}
    assert server["push:l0 (worker 1)"][0] == set()  # its backward is on the worker's rank
    ranks = chakra_ranks(run(trace, workers=2, arch="ddp", mode="sync"), trace)
    worker = deps_by_name(ranks[1])
    assert worker["allreduce:bucket0"][0] == {"backward:l0", "backward:l2"}
    assert worker["update:l0"][0] == {"allreduce:bucket0"}  # through join:buckets
    assert worker["update:l0"][1] == {"update:l2"}  # ran after it on the device, not in the DAG


def deps_by_name(rank: chakra.ChakraRank) -> dict[str, tuple[set[str], set[str]]]:
    names = [n.name for n in rank.nodes]
    return {
        n.name: ({names[d] for d in n.data_deps}, {names[d] for d in n.ctrl_deps})
        for n in rank.nodes
    }


def test_files_are_length_delimited_like_chakra_protolib(tmp_path: Path) -> None:
    """Decoded as protolib.decodeMessage does: varint length, then the message."""
    trace = tiny()
    write_chakra_dir(tmp_path, chakra_ranks(run(trace, workers=2, arch="ps", mode="sync"), trace))
    raw = (tmp_path / "sgdsim.2.et").read_bytes()
    pos, messages = 0, []
    while pos < len(raw):
        size, pos = _DecodeVarint32(raw, pos)
        messages.append(raw[pos : pos + size])
        pos += size
    meta = pb.GlobalMetadata.FromString(messages[0])
    assert attrs(meta)["role"] == "server"
    assert all(pb.Node.FromString(m).name for m in messages[1:])  # no empty message ends a read


def test_explicit_step_and_its_errors(tmp_path: Path) -> None:
    trace = tiny()
    result = run(trace, workers=2, arch="allreduce", mode="sync")
    assert {attrs(r.metadata)["step"] for r in chakra_ranks(result, trace, step=0)} == {0}
    with pytest.raises(ConfigError, match=r"^step: 6 was not simulated; .*0\.\.5$"):
        chakra_ranks(result, trace, step=6)
    with pytest.raises(ConfigError, match=r"^trace: its ops differ"):
        chakra_ranks(result, shipped("cnn"))
    without = run(trace, workers=2, arch="allreduce", mode="sync", timeline=False)
    with pytest.raises(ConfigError, match=r"^result: has no timeline"):
        chakra_ranks(without, trace)


def test_write_refuses_existing_and_stale_files(tmp_path: Path) -> None:
    trace = tiny()
    ranks = chakra_ranks(run(trace, workers=2, arch="ps", mode="sync"), trace)
    write_chakra_dir(tmp_path, ranks, prefix="w")
    before = (tmp_path / "w.0.et").read_bytes()
    with pytest.raises(ConfigError, match="already exists") as err:
        write_chakra_dir(tmp_path, ranks, prefix="w")
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="already exists"):  # as the CLI checks before a run
        check_chakra_dir(tmp_path, range(3), prefix="w")
    assert check_chakra_dir(tmp_path, [0], prefix="v") == [tmp_path / "v.0.et"]
    write_chakra_dir(tmp_path, ranks, prefix="w", overwrite=True)
    assert (tmp_path / "w.0.et").read_bytes() == before
    (tmp_path / "w.7.et").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"w\.7\.et: a rank this export does not write"):
        write_chakra_dir(tmp_path, ranks, prefix="w", overwrite=True)
    with pytest.raises(ConfigError, match=r"^prefix:"):
        write_chakra_dir(tmp_path, ranks, prefix="a/b")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is not a folder"):
        write_chakra_dir(tmp_path / "file", ranks)


def test_read_names_a_truncated_file(tmp_path: Path) -> None:
    trace = tiny()
    [path, *_] = write_chakra_dir(
        tmp_path, chakra_ranks(run(trace, workers=2, arch="ddp", mode="sync"), trace)
    )
    cut = tmp_path / "cut.et"
    cut.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(ConfigError, match=r"cut\.et: .*truncated"):
        read_chakra_file(cut)


def test_missing_protobuf_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(name: str) -> None:
        raise ImportError("No module named 'google.protobuf'")

    monkeypatch.setattr(chakra.importlib, "import_module", fail)
    with pytest.raises(ConfigError, match=r"^--chakra-dir: needs protobuf .*sgdsim\[chakra\]"):
        chakra.require_protobuf("--chakra-dir")


@pytest.mark.skipif(importlib.util.find_spec("grpc_tools") is None, reason="needs grpcio-tools")
def test_generated_module_matches_the_vendored_proto(tmp_path: Path) -> None:
    shutil.copy(SCHEMA_DIR / "et_def.proto", tmp_path / "et_def.proto")
    args = ["-I", str(tmp_path), f"--python_out={tmp_path}", "et_def.proto"]
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", *args], check=True)
    generated = (tmp_path / "et_def_pb2.py").read_text()
    assert generated == (SCHEMA_DIR / "et_def_pb2.py").read_text()
