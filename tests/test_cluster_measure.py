"""``sgdsim network measure`` between hosts (profilers.cluster_measure): the world it is launched
into, the fit's standard errors, and, on the emulated cluster (root), N real processes in N
network namespaces launched the way torchrun launches them (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT), measuring a shaped link.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from profilers.cluster_measure import (
    ClusterOptions,
    World,
    measure_cluster,
    measuring_ranks,
    world_from,
)
from simcore.errors import ConfigError
from simcore.network import fit_errors, fit_linear_transfer, network_profile_from_dict

RATE_BPS = 500e6


# ----------------------------------------------------------------------------- the world
def test_the_world_comes_from_torchruns_environment_and_the_options_win() -> None:
    env = {"RANK": "2", "WORLD_SIZE": "4", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
    assert world_from(None, None, None, None, env) == World(2, 4, None, None)
    assert world_from(None, None, None, None, env).init_method == "env://"  # type: ignore[union-attr]
    # options given win over the environment, and name the address themselves
    world = world_from(1, 3, "10.0.0.9", 29511, env)
    assert world == World(1, 3, "10.0.0.9", 29511)
    assert world.init_method == "tcp://10.0.0.9:29511"
    assert world_from(0, None, "fe80::1", 5, {}).init_method == "tcp://[fe80::1]:5"  # type: ignore[union-attr]
    # a port from the environment serves --rank; two ranks unless told
    assert world_from(1, None, "h", None, {"MASTER_PORT": "7"}) == World(1, 2, "h", 7)
    assert world_from(None, None, None, None, {}) is None  # loopback, as before


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        ((0, 1, None, 5), {}, r"--world-size: must be >= 2"),
        ((3, 2, None, 5), {}, r"--rank: must be 0\.\.1, got 3"),
        ((0, 2, None, None), {}, r"--master-port: needed with --rank"),
        ((None, 2, None, None), {}, r"--world-size: needs --rank"),
        ((None, None, None, None), {"RANK": "x", "MASTER_ADDR": "a"}, r"environment RANK: .*'x'"),
        ((None, None, None, None), {"RANK": "5", "WORLD_SIZE": "2", "MASTER_ADDR": "a"}, r"RANK"),
        ((0, 2, "a", 70000), {}, r"--master-port: must be in 1\.\.65535"),
    ],
)
def test_a_bad_world_is_named(args: tuple[Any, ...], env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        world_from(*args, env)


def test_a_ring_larger_than_the_world_is_refused_before_joining() -> None:
    # the port is never contacted: the check comes first
    with pytest.raises(ConfigError, match=r"--ring-max: at most the 2 ranks measuring, got 3"):
        measure_cluster(World(0, 2, "127.0.0.1", 1), ClusterOptions(ring_max=3))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--size-time", "20ms"], r"--size-time: only between hosts"),
        (["--rank", "0", "--master-port", "5", "--keep-fit", "loopback"], r"--keep-fit: .*RANK"),
        (["--rank", "0", "--master-port", "5", "--world-size", "1"], r"--world-size: must be"),
    ],
)
def test_measure_options_name_what_does_not_fit(argv: list[str], message: str) -> None:
    import argparse

    from profilers.network_measure import add_measure_arguments, options_from_args

    parser = argparse.ArgumentParser()
    add_measure_arguments(parser)
    with pytest.raises(ConfigError, match=message):
        options_from_args(parser.parse_args(argv))


# ----------------------------------------------------------------------------- the fit
def test_an_exact_line_has_no_fit_error_and_a_noisy_one_a_reproducible_one() -> None:
    sizes = [1 << k for k in range(10, 21)]
    exact = [(n, [1e-4 + 8 * n / 2e8] * 5) for n in sizes]
    latency_se, bandwidth_se = fit_errors(exact)
    assert latency_se < 1e-15 and bandwidth_se < 1e-9 * 2e8  # rounding only
    noisy = [
        (n, [t * (1 + 0.02 * ((i * 7 + k) % 5 - 2)) for i in range(5)])
        for k, (n, [t, *_]) in enumerate(exact)
    ]
    first = fit_errors(noisy, seed=3)
    assert first == fit_errors(noisy, seed=3)  # seeded
    latency_se, bandwidth_se = first
    _, bandwidth, _ = fit_linear_transfer(sizes, [sorted(t)[2] for _, t in noisy])
    # 2 % noise on each repetition: the bandwidth's error is a fraction of it, not zero
    assert 0 < bandwidth_se < 0.05 * bandwidth and latency_se >= 0


# ----------------------------------------------------------------------------- real ranks
def test_one_rank_of_each_host_measures() -> None:
    assert measuring_ranks(["a", "a", "b", "c", "b"]) == [0, 2, 3]
    assert measuring_ranks(["b", "a", "b"]) == [0, 1]
    assert measuring_ranks(["a", "a", "a"]) == [0, 1, 2]  # one host: its loopback, every rank


def _measure(
    cluster: Any,
    tmp_path: Path,
    ranks: int,
    *extra: str,
    tag: str,
    hosts: str = "",
    options: bool = False,
) -> tuple[dict[str, Any], list[str]]:
    """Run ``sgdsim network measure`` as ``ranks`` processes in the cluster's namespaces with
    torchrun's environment (``options``: RANK only, the master and world size as options;
    ``hosts``: each rank's host name, set in a UTS namespace of its own); rank 0's profile and
    every rank's stdout."""
    out = tmp_path / f"{tag}.json"
    procs = []
    for rank in range(ranks):
        env = dict(os.environ, RANK=str(rank), GLOO_SOCKET_IFNAME=cluster.ifname)
        env.pop("MASTER_ADDR", None)
        master = ["--master-addr", cluster.addrs[0], "--master-port", "29517"]
        if options:  # the rest as options, which win over the environment
            master += ["--world-size", str(ranks)]
        else:
            env.update(WORLD_SIZE=str(ranks), MASTER_ADDR=master[1], MASTER_PORT=master[3])
            master = []
        cmd = ["ip", "netns", "exec", cluster.namespaces[rank], sys.executable, "-m"]
        cmd += ["simcore.cli.main", "network", "measure", "-o", str(out), *master, *extra]
        if hosts:
            named = f'hostname {hosts.split(",")[rank]} && exec "$@"'
            cmd = ["unshare", "--uts", "sh", "-c", named, "sh", *cmd]
        procs.append(
            subprocess.Popen(
                cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    outputs = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr[-2000:]
        outputs.append(stdout)
    return json.loads(out.read_text()), outputs


def test_three_hosts_measure_every_part_of_a_shaped_link(root_only: Any, tmp_path: Path) -> None:
    from profilers.netns_cluster import emulated_cluster

    # four ranks on three hosts, two on the first (torchrun --nproc-per-node 2 there): ranks
    # 0, 2 and 3 measure, rank 1 leaves it to rank 0
    with emulated_cluster(4, dict.fromkeys(range(4), RATE_BPS)) as cluster:
        data, outputs = _measure(
            cluster, tmp_path, 4, tag="three", hosts="ha,ha,hb,hc", options=True
        )
    profile = network_profile_from_dict(data)
    # the one flow: the shaped rate less the headers tbf counts (about 5 %), within the fit's
    # stated error (a busy machine's scheduling delays bend the line)
    se = profile.bandwidth_se_bps
    assert se is not None and 0 < se < 0.1 * RATE_BPS
    assert 0.85 * RATE_BPS - 2 * se < profile.bandwidth_bps < RATE_BPS + 2 * se
    assert profile.endpoints == "3 ranks on 3 host(s) (ha, hb, hc)"
    # the sizes stopped growing once a transfer took 50 ms: 4 MiB at 500 Mbit/s is 67 ms
    largest, time_s = profile.samples[-1]
    assert time_s >= 0.05 and largest <= 8 << 20
    assert profile.transfer_cpu is not None and profile.transfer_cpu.s_per_byte > 0
    sharing = profile.flow_sharing
    assert sharing is not None and sharing.pull_cv is not None and sharing.push_cv is not None
    ring = profile.ring_goodput
    assert ring is not None and [w for w, _ in ring.points] == [2, 3]
    assert all(0.5 * RATE_BPS < bps <= RATE_BPS for _, bps in ring.points)
    assert ring.message_latency_s is not None and ring.message_latency_s >= 0
    assert profile.duplex is not None and 1.0 < profile.duplex.ratio <= 2.05
    assert profile.duplex_interference is None  # it needs a server and three workers
    # only rank 0 wrote and printed the profile; the others said one line
    assert "bandwidth" in outputs[0]
    for rank in (1, 2, 3):
        assert outputs[rank].strip() == f"rank {rank}: done; rank 0 wrote the profile"


def test_a_shorter_fit_agrees_within_its_stated_uncertainty(root_only: Any, tmp_path: Path) -> None:
    from profilers.netns_cluster import emulated_cluster

    fit_only = ("--no-cpu", "--no-sharing", "--no-ring", "--no-duplex")
    with emulated_cluster(2, dict.fromkeys(range(2), RATE_BPS)) as cluster:
        full, _ = _measure(cluster, tmp_path, 2, *fit_only, tag="full")
        short, _ = _measure(
            cluster,
            tmp_path,
            2,
            *fit_only,
            "--repeats",
            "5",
            "--warmup",
            "1",
            "--size-time",
            "25ms",
            tag="short",
        )
    a, b = network_profile_from_dict(full), network_profile_from_dict(short)
    assert len(b.samples) < len(a.samples)  # it stopped sooner
    assert a.bandwidth_se_bps is not None and b.bandwidth_se_bps is not None
    combined = math.hypot(a.bandwidth_se_bps, b.bandwidth_se_bps)
    assert abs(a.bandwidth_bps - b.bandwidth_bps) <= 2 * combined
