"""``SimulationConfig.overlap``: overlapping communication and computation or strict phases.

The closed forms use a 3-layer chain at W = 1 and B = 1 Gbit/s (bytes 1 MB, 2 MB, 0.5 MB, so
pulls and pushes take 8, 16 and 4 ms; forwards 10, 20, 30 ms; backwards 20, 40, 60 ms):

- strict phases: every pull, then all computation, then every push:
  (8 + 16 + 4) + (60 + 120) + (4 + 16 + 8) = 236 ms;
- layerwise (the trace's DAG): pulls end at 8, 24, 28 ms; forwards run 8-18, 24-44, 44-74;
  backward l2 74-134, its push 134-138; backward l1 134-174, push 174-190; backward l0 174-194,
  push 194-202: the step takes 202 ms.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcore.cli.main import main
from simcore.errors import ConfigError
from simcore.sim import SimulationConfig, SimulationResult, simulate
from simcore.trace.build import synthetic_trace
from simcore.trace.model import Trace
from simcore.trace.parse import trace_from_dict, trace_to_dict

from output_support import point

B = 1e9
FORWARD_S = [0.010, 0.020, 0.030]
BACKWARD_S = [0.020, 0.040, 0.060]
NBYTES = [1_000_000, 2_000_000, 500_000]
TRANSFER_S = sum(NBYTES) * 8 / B  # 28 ms each way
STRICT_S = TRANSFER_S + sum(FORWARD_S) + sum(BACKWARD_S) + TRANSFER_S  # 236 ms
LAYERWISE_S = 0.202  # the critical path worked out in the module docstring


def chain(update_s: float = 0.0, overlap: bool = True) -> Trace:
    return synthetic_trace(FORWARD_S, BACKWARD_S, NBYTES, update_s=update_s, overlap=overlap)


def step_s(trace: Trace, **config: object) -> float:
    """The mean step time (s) of each worker: W / the job's steps per second."""
    base = SimulationConfig(bandwidth_bps=B, steps=6, warmup_steps=1, seed=3)
    result = simulate(trace, dataclasses.replace(base, **config))  # type: ignore[arg-type]
    return result.config.workers / result.steps_per_s.value


@pytest.mark.parametrize("mode", ["async", "sync"])
@pytest.mark.parametrize("sharing", ["ps", "fcfs"])
def test_strict_step_is_the_sum_of_its_phases(mode: str, sharing: str) -> None:
    assert step_s(chain(), overlap="none", mode=mode, sharing=sharing) == pytest.approx(STRICT_S)


def test_layerwise_step_is_the_critical_path() -> None:
    assert step_s(chain()) == pytest.approx(LAYERWISE_S)
    assert step_s(chain(), overlap="layerwise") == pytest.approx(LAYERWISE_S)


def test_server_updates_still_follow_their_own_push() -> None:
    # 5 ms updates. The pushes all start at 180 ms + 28 ms of pulls, in trace order l2, l1, l0
    # (4, 16, 8 ms); each update starts when its push has arrived and ends 5 ms later, before
    # the next push ends: only the last update (after the last push) lengthens the step.
    assert step_s(chain(update_s=0.005), overlap="none") == pytest.approx(STRICT_S + 0.005)


def test_strict_config_equals_a_trace_built_with_strict_phases() -> None:
    """Two routes to the same DAG semantics: the config's transform and the trace builder's."""
    fwd = [[0.004, 0.002, 0.006], [0.005, 0.003, 0.004]]
    bwd = [[0.008, 0.004, 0.009], [0.007, 0.005, 0.010]]
    sizes = [300_000, 0, 900_000]
    base = SimulationConfig(workers=3, bandwidth_bps=B, steps=40, warmup_steps=5, seed=2)
    layerwise = synthetic_trace(fwd, bwd, sizes, update_s=0.001)
    built_strict = synthetic_trace(fwd, bwd, sizes, update_s=0.001, overlap=False)
    for mode in ("async", "sync"):
        config = dataclasses.replace(base, mode=mode)
        via_config = simulate(layerwise, dataclasses.replace(config, overlap="none"))
        via_trace = simulate(built_strict, config)
        assert via_config.steps_per_s.value == pytest.approx(via_trace.steps_per_s.value)


def test_ring_allreduce_strict_sends_after_the_whole_backward_pass() -> None:
    # W = 2 ring: no pulls; each AllReduce carries 2(K-1)/K = 1 times the layer's bytes at B.
    # Strict: 180 ms of computation, then 28 ms of AllReduce. Layerwise: forwards 0-60 ms,
    # backward l2 60-120 then its AllReduce 120-124, l1 120-160 then 160-176, l0 160-180 then
    # 180-188 ms.
    ring = {"arch": "allreduce", "mode": "sync", "workers": 2}
    assert step_s(chain(), overlap="none", **ring) == pytest.approx(0.180 + TRANSFER_S)
    assert step_s(chain(), **ring) == pytest.approx(0.188)


def test_unknown_overlap_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"^overlap: 'full' is not one of layerwise, none"):
        SimulationConfig(overlap="full")


def test_strict_phases_that_would_form_a_cycle_are_refused() -> None:
    # A pull that waits for a forward: strict phases would make that forward wait for the pull.
    doc = trace_to_dict(chain())
    for op in doc["ops"]:
        if op["id"] == "pull:l1":
            op["deps"] = ["forward:l0"]
    odd = trace_from_dict(doc, source="odd.json")
    assert step_s(odd) > 0  # fine as it is
    with pytest.raises(ConfigError, match=r"^overlap: 'none' .* does not fit trace odd.json"):
        step_s(odd, overlap="none")


@st.composite
def random_traces(draw: st.DrawFn) -> Trace:
    n = draw(st.integers(1, 5))
    inputs = {}
    for i in range(1, n):
        srcs = draw(st.sets(st.integers(0, i - 1), max_size=min(i, 2)))
        inputs[f"l{i}"] = [f"l{j}" for j in sorted(srcs)] or [f"l{i - 1}"]
    sizes = draw(st.lists(st.sampled_from([0, 20_000, 250_000]), min_size=n, max_size=n))
    durations = st.lists(st.floats(1e-4, 0.005), min_size=n, max_size=n)
    return synthetic_trace(
        draw(durations),
        draw(durations),
        sizes,
        update_s=draw(st.sampled_from([0.0, 0.0005])),
        inputs=inputs,
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=random_traces(), bandwidth=st.sampled_from([1e8, 1e9]))
def test_layerwise_is_never_slower_than_strict_for_one_worker(
    trace: Trace, bandwidth: float
) -> None:
    """One worker, one server: the links and the compute are work-conserving FIFO slots.

    The downlink sends every pull back to back from the step's start either way. With overlap,
    once the last pull has arrived the computation never idles (nothing else can block it), so
    it ends by pulls + computation; every push is then ready and the uplink ends by pulls +
    computation + pushes, where strict phases end at the earliest. Updates are too short here to
    queue at the server.
    """
    if not any(layer.param_nbytes for layer in trace.layers):
        return  # nothing to overlap
    strict = step_s(trace, overlap="none", bandwidth_bps=bandwidth, steps=3)
    layerwise = step_s(trace, bandwidth_bps=bandwidth, steps=3)
    assert layerwise <= strict * (1 + 1e-9)


def phases_of(result: SimulationResult) -> dict[tuple[int, int], dict[str, list[float]]]:
    """Per (worker, step): the ends of pull-side ops and the starts/ends of computation and the
    starts of pushes, from the timeline."""
    out: dict[tuple[int, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    assert result.timeline is not None
    for r in result.timeline:
        key = (r.worker, r.step)
        if r.kind == "pull" or r.op.startswith(("latency:pull", "parse:pull")):
            out[key]["pulled"].append(r.end_s)
        elif r.kind in ("forward", "backward"):
            out[key]["compute_start"].append(r.start_s)
            out[key]["compute_end"].append(r.end_s)
        elif r.kind == "push":
            out[key]["push_start"].append(r.start_s)
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    trace=random_traces(),
    workers=st.integers(1, 3),
    arch_mode=st.sampled_from([("ps", "async"), ("ps", "sync"), ("allreduce", "sync")]),
    sharing=st.sampled_from(["ps", "fcfs"]),
    extra=st.sampled_from([{}, {"latency_s": 2e-4}, {"parse_beta_s": 1e-4}, {"servers": 2}]),
)
def test_strict_phases_hold_in_every_step(
    trace: Trace,
    workers: int,
    arch_mode: tuple[str, str],
    sharing: str,
    extra: dict[str, float],
) -> None:
    arch, mode = arch_mode
    if arch == "allreduce" and "servers" in extra:
        return
    config = SimulationConfig(
        workers=workers,
        bandwidth_bps=1e9,
        arch=arch,
        mode=mode,
        sharing="allreduce" if arch == "allreduce" else sharing,
        steps=3,
        warmup_steps=0,
        batches=2,
        overlap="none",
        timeline=True,
        **extra,  # type: ignore[arg-type]
    )
    for phases in phases_of(simulate(trace, config)).values():
        compute_start = min(phases["compute_start"])
        compute_end = max(phases["compute_end"])
        assert max(phases["pulled"], default=0.0) <= compute_start + 1e-12
        assert compute_end <= min(phases["push_start"], default=compute_end) + 1e-12


def test_cli_overlap_option(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "cnn-b32", "--steps", "12", "--warmup", "2", "--bandwidth", "1Gbps"]
    assert main([*args, "--overlap", "none", "--json"]) == 0
    strict = point(capsys.readouterr().out)
    assert main([*args, "--json"]) == 0
    layerwise = point(capsys.readouterr().out)
    assert strict["config"]["overlap"] == "none" and layerwise["config"]["overlap"] == "layerwise"
    assert layerwise["steps_per_s"]["value"] > strict["steps_per_s"]["value"]
