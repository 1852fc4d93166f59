"""The link a prediction uses, each value with where it came from (option, profile, default).

A network profile (:mod:`simcore.network`) carries more than a bandwidth: a latency, how unevenly
concurrent flows share the link, the transfers' CPU cost, a ring AllReduce's goodput per W.
:class:`LinkSettings` holds the values a command settled on, each as a :class:`Sourced` value,
applies them to a :class:`~simcore.sim.SimulationConfig` where they apply, and says in one line
which effects were on and where each came from, e.g.::

    link: 920 Mbit/s + 33.5 us (veth-1gbit), flow weight cv 0.26 (veth-1gbit), transfer CPU
    38 ns/B on 2 cores (--comm-cpu)

Pure: the command line (``simcore.cli.link_options``) and the validation build it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from simcore.errors import ConfigError
from simcore.network_effects import RingGoodput, interference_text
from simcore.sim import SimulationConfig
from simcore.trace.cpu import measured_transfers
from simcore.trace.model import Trace
from simcore.units import format_bandwidth, format_bytes, format_seconds

__all__ = [
    "DEFAULT_SOURCE",
    "FLOW_SHARINGS",
    "FRESH_SHARING",
    "FULL_DUPLEX",
    "WARM_SHARING",
    "LinkSettings",
    "Sourced",
    "duplex_limit_bps",
    "ring_parse_alpha",
    "with_traces",
]

T = TypeVar("T")
DEFAULT_SOURCE = "default"
FULL_DUPLEX = 2.0  # both directions of a link together carry twice one's goodput
# Which measurement of how a link shares concurrent transfers gives a validation's flow weight
# cvs: flows on new connections (profilers.link_sharing) or transfers over connections kept
# open, as training's are (profilers.warm_sharing).
FRESH_SHARING, WARM_SHARING = "fresh", "warm"
FLOW_SHARINGS = (FRESH_SHARING, WARM_SHARING)


def duplex_limit_bps(ratio: float, bandwidth_bps: float) -> float | None:
    """The simulator's ``duplex_bps`` for a duplex ``ratio`` (both directions' goodput over
    one's) on a link of ``bandwidth_bps``: None (no limit) at full duplex or above."""
    return ratio * bandwidth_bps if ratio < FULL_DUPLEX else None


@dataclass(frozen=True)
class Sourced(Generic[T]):
    """A value and where it came from: an option as typed (``--comm-cpu``), a network profile
    as named (``veth-1gbit``), a topology (``topology aws-p3.16xlarge``) or ``default``."""

    value: T
    source: str = DEFAULT_SOURCE

    @property
    def is_option(self) -> bool:
        return self.source.startswith("--")

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "source": self.source}


@dataclass(frozen=True)
class LinkSettings:
    """The link of a prediction (units: bit/s, seconds, CPU seconds per byte, cores).

    ``ring`` is the profile's ring AllReduce goodput per W, used as a ring's bandwidth when
    ``bandwidth_bps`` came from that profile too. ``host_cpu_cores`` is the cores the transfers'
    CPU cost competes on when ``--host-cores`` leaves them open. ``duplex_ratio`` is what a
    parameter server's link carries both ways at once over one way (2: full duplex, the
    default); ``duplex_interference``, where given, the other model of those two directions
    (``SimulationConfig.duplex_interference``), used instead. ``note`` says what the profile
    lacks ("" when nothing or no profile).
    ``trace_beside_transfers``: the trace replayed was measured beside a real parameter server
    (its transfers' durations measured), so its computation holds what its transfers cost it
    and a parameter server's transfer CPU per byte (a profile's, meant for a trace of the
    computation alone) is not added on top unless ``--comm-cpu`` asks for it.
    """

    bandwidth_bps: Sourced[float]
    latency_s: Sourced[float] = Sourced(0.0)
    flow_weight_cv: Sourced[float] = Sourced(0.0)
    flow_weight_cv_push: Sourced[float] | None = None
    comm_cpu_s_per_byte: Sourced[float] = Sourced(0.0)
    host_cpu_cores: Sourced[float | None] = Sourced(None)
    duplex_ratio: Sourced[float] = Sourced(FULL_DUPLEX)
    duplex_interference: Sourced[tuple[float, float, float]] | None = None
    ring: RingGoodput | None = None
    profile: str | None = None
    note: str = ""
    trace_beside_transfers: bool = False
    # Where a profile's ring CPU work runs when an option said so (--parse-placement); None:
    # "pipelined", with each all-reduce's messages, as the validation predicts rings.
    ring_cpu_placement: str | None = None

    def ring_bandwidth(self, workers: int) -> tuple[int, float] | None:
        """The ring goodput ``(W measured, bit/s)`` for a ring of ``workers``, if it applies:
        the profile measured one and the bandwidth is the profile's."""
        if self.ring is None or self.bandwidth_bps.source != self.profile:
            return None
        return self.ring.nearest(workers)

    def ring_terms(self, config: SimulationConfig) -> RingGoodput | None:
        """The profile's ring effect when the simulator's ring of ``config`` uses its cost per
        message (and CPU per byte) rather than its goodput: arch allreduce, a profile of
        version 3 or later, and the bandwidth from that profile."""
        ring = self.ring if config.ring_collective else None
        if ring is None or ring.message_latency_s is None:
            return None
        return ring if self.bandwidth_bps.source == self.profile else None

    def ring_bytes_bandwidth(self, config: SimulationConfig) -> tuple[int, float] | None:
        """``(W measured, bit/s)``: the rate the profile's ring of ``config.workers`` (else
        the nearest W measured) moved its bytes at beyond its messages' cost, when the ring
        terms apply and the profile measured it (no faster than the profile's bandwidth)."""
        terms = self.ring_terms(config)
        measured = terms.bandwidth(config.workers) if terms is not None else None
        if measured is None:
            return None
        return measured[0], min(measured[1], self.bandwidth_bps.value)

    def duplex_applies(self, config: SimulationConfig) -> bool:
        """Whether a duplex limit applies to ``config``: one parameter server's link."""
        return config.arch == "ps" and config.servers == 1

    def weights_apply(self, config: SimulationConfig) -> bool:
        """Whether flow weights apply to ``config``: a parameter server's ``ps`` link."""
        return config.arch == "ps" and config.policy_name == "ps"

    def apply(self, config: SimulationConfig, *, strict: bool = True) -> SimulationConfig:
        """``config`` with this link: bandwidth (a ring's measured goodput for a ring),
        latency, flow weights where they apply, and the transfers' CPU cost (on the config's
        ``host_cpu_cores``, else the profile's host's cores). ``strict=False`` (a search over
        configurations): flow weights from an option are left out where they do not apply.

        A duplex ratio below 2 limits a parameter server's two directions together to that
        multiple of the (final) bandwidth (``duplex_bps``); a duplex interference, where given,
        applies instead (``duplex_interference``).

        Raises
        ------
        ConfigError
            ``--flow-weight-cv``, ``--duplex`` or ``--duplex-interference`` given for a link it
            does not apply to
            (``strict``), or ``--comm-cpu`` without any host cores; naming the option.
        """
        changes: dict[str, Any] = {
            "bandwidth_bps": self.bandwidth_bps.value,
            "latency_s": self.latency_s.value,
        }
        terms = self.ring_terms(config)
        ring = self.ring_bandwidth(config.workers) if config.ring_collective else None
        if terms is not None:
            changes.update(self._ring_changes(terms, config))
        elif ring is not None:
            changes["bandwidth_bps"] = ring[1]
        cv, push = self.flow_weight_cv, self.flow_weight_cv_push
        if push is not None and self.weights_apply(config):  # the directions measured apart
            changes.update(flow_weight_cv=cv.value, flow_weight_cv_push=push.value)
        elif cv.value > 0 and self.weights_apply(config):
            changes["flow_weight_cv"] = cv.value
        elif cv.value > 0 and cv.is_option and strict:
            raise ConfigError(
                f"{cv.source}: flow weights apply to a parameter server's link with ps sharing, "
                f"not --arch {config.arch} with --sharing {config.policy_name}"
            )
        duplex = self.duplex_ratio
        limit = duplex_limit_bps(duplex.value, changes["bandwidth_bps"])
        interference = self.duplex_interference
        if interference is not None:
            limit = None  # the other model of the same two directions
            if self.duplex_applies(config):
                changes["duplex_interference"] = interference.value
            elif interference.is_option and strict:
                raise ConfigError(
                    f"{interference.source}: applies to one parameter server's link, not "
                    f"{_not_one_server(config)}"
                )
        if limit is not None and self.duplex_applies(config):
            changes["duplex_bps"] = limit
        elif limit is not None and duplex.is_option and strict:
            raise ConfigError(
                f"{duplex.source}: a duplex limit applies to one parameter server's link, not "
                f"{_not_one_server(config)}"
            )
        cpu = self.comm_cpu_s_per_byte
        # A ring's own CPU per byte (the profile's ring terms) replaces the transfers' cost;
        # so does a parameter server's communication threads' CPU per step, which models the
        # same work for a trace that ran beside its transfers.
        ring_cpu = terms is not None and terms.cpu_s_per_byte is not None and not cpu.is_option
        if cpu.value > 0 and not ring_cpu and self._transfer_cpu_left_out(config) is None:
            cores = config.host_cpu_cores
            if cores is None:
                cores = self.host_cpu_cores.value
            if cores is None:
                raise ConfigError(
                    f"{cpu.source}: the transfers' CPU cost needs --host-cores (the cores on "
                    "which it competes with the computation)"
                )
            changes.update(comm_cpu_s_per_byte=cpu.value, host_cpu_cores=cores)
        return dataclasses.replace(config, **changes)

    def _transfer_cpu_left_out(self, config: SimulationConfig) -> str | None:
        """Why a profile's transfer CPU per byte does not apply to ``config`` (None: it does,
        if there is one): a parameter server's communication threads stand in for it, or the
        trace's computation ran beside its transfers. A ``--comm-cpu`` given always applies."""
        if self.comm_cpu_s_per_byte.is_option or config.arch != "ps":
            return None
        if config.comm_thread_s_per_step > 0:
            return "the communication threads' CPU per step stands for it"
        if self.trace_beside_transfers:
            return "the trace's computation ran beside its transfers and holds their cost"
        return None

    def _ring_changes(self, terms: RingGoodput, config: SimulationConfig) -> dict[str, Any]:
        """A ring's fixed cost per message (unless ``--latency`` was given) and its CPU per
        byte, as the validation predicts rings: the work on each message once it has arrived,
        on a thread of the worker's that shares the host's cores (``parse_placement=
        "pipelined"``), unless ``--comm-cpu`` or a parsing cost was given."""
        changes: dict[str, Any] = {}
        if not self.latency_s.is_option:
            changes["latency_s"] = terms.message_latency_s
        measured = self.ring_bytes_bandwidth(config)
        if measured is not None:
            changes["bandwidth_bps"] = measured[1]
        own_parse = config.parse_alpha_s_per_byte > 0 or config.parse_beta_s > 0
        # The messages the cost per message was measured over, unless --ring-segment says
        # otherwise.
        if terms.segment_bytes is not None and config.ring_segment_bytes is None:
            changes["ring_segment_bytes"] = terms.segment_bytes
        cpu = terms.cpu_s_per_byte
        if cpu and config.workers > 1 and not own_parse and not self.comm_cpu_s_per_byte.is_option:
            # Each layer's all-reduce sends and receives 2(W-1)/W of its bytes; the simulator
            # charges the parsing cost per byte of the layer.
            changes["parse_alpha_s_per_byte"] = ring_parse_alpha(cpu, config.workers)
            changes["parse_placement"] = self._ring_placement
            cores = config.host_cpu_cores
            if cores is None:
                cores = self.host_cpu_cores.value
            if cores is not None:
                changes["host_cpu_cores"] = cores
        return changes

    def _ring_cpu_used(self, config: SimulationConfig) -> float | None:
        """The profile's ring CPU per byte if ``config`` (as :meth:`apply` made it) charges it
        (0 when the profile measured none), else None."""
        terms = self.ring_terms(config)
        cpu = terms.cpu_s_per_byte if terms is not None else None
        if cpu is None or self.comm_cpu_s_per_byte.is_option:
            return None
        if cpu == 0 or config.workers < 2:
            return cpu
        alpha = ring_parse_alpha(cpu, config.workers)
        used = config.parse_placement == self._ring_placement
        return cpu if used and config.parse_alpha_s_per_byte == alpha else None

    @property
    def _ring_placement(self) -> str:
        return self.ring_cpu_placement or "pipelined"

    def describe(self, config: SimulationConfig) -> str:
        """One line: the link ``config`` (as :meth:`apply` made it) uses, and where each value
        came from; which effects were on, off, or not applicable."""
        parts = [
            self._link_text(config),
            self._weights_text(config),
            self._duplex_text(config),
            self._cpu_text(config),
        ]
        return "link: " + ", ".join(parts)

    def _duplex_text(self, config: SimulationConfig) -> str:
        interference = self.duplex_interference
        if interference is not None:
            text = f"{interference_text(interference.value)} ({interference.source})"
            if not self.duplex_applies(config):
                text += f" not used: arch {config.arch}, servers {config.servers}"
            return text
        duplex = self.duplex_ratio
        if duplex.value >= FULL_DUPLEX:
            return "full duplex" + _unless_default(duplex)
        text = f"both directions {duplex.value:.3g}x one ({duplex.source})"
        if not self.duplex_applies(config):
            text += f" not used: arch {config.arch}, servers {config.servers}"
        return text

    def _link_text(self, config: SimulationConfig) -> str:
        bandwidth, latency = self.bandwidth_bps, self.latency_s
        ring = self.ring_bandwidth(config.workers) if config.ring_collective else None
        terms = self.ring_terms(config)
        if terms is not None and not latency.is_option:
            segments = config.ring_segment_bytes
            count = (
                "2(W-1) per all-reduce"
                if segments is None
                else f"in segments of at most {format_bytes(segments)}"
            )
            measured = self.ring_bytes_bandwidth(config)
            rate = format_bandwidth(bandwidth.value)
            if measured is not None:
                rate = f"{format_bandwidth(measured[1])} (the bytes of a ring of {measured[0]})"
            return (
                f"{rate} + {format_seconds(config.latency_s)} per ring AllReduce message, "
                f"{count} ({self.profile})"
            )
        if ring is not None and terms is None:
            rate = (
                f"{format_bandwidth(ring[1])} ring AllReduce goodput measured at W={ring[0]}"
                f" ({self.profile})"
            )
        else:
            rate = f"{format_bandwidth(bandwidth.value)}"
            if bandwidth.source != latency.source:
                rate += f" ({bandwidth.source})"
        return f"{rate} + {format_seconds(latency.value)} ({latency.source})"

    def _weights_text(self, config: SimulationConfig) -> str:
        cv, push = self.flow_weight_cv, self.flow_weight_cv_push
        if push is not None:
            text = f"flow weight cv {cv.value:.3g} pull / {push.value:.3g} push ({cv.source})"
        elif cv.value <= 0:
            return "flow weight cv off" + _unless_default(cv)
        else:
            text = f"flow weight cv {cv.value:.3g} ({cv.source})"
        if not self.weights_apply(config):
            text += f" not used: arch {config.arch}, sharing {config.policy_name}"
        return text

    def _cpu_text(self, config: SimulationConfig) -> str:
        cpu = self.comm_cpu_s_per_byte
        ring_cpu = self._ring_cpu_used(config)
        if ring_cpu is not None:
            where = f" on {config.host_cpu_cores:g} cores" if config.host_cpu_cores else ""
            placed = (
                "on each message as it arrives"
                if self._ring_placement == "pipelined"
                else "after each all-reduce (--parse-placement)"
            )
            return (
                f"ring CPU {ring_cpu * 1e9:.3g} ns per byte sent or received, {placed}{where} "
                f"({self.profile})"
            )
        if cpu.value <= 0:
            return "transfer CPU off" + _unless_default(cpu)
        left_out = self._transfer_cpu_left_out(config)
        if left_out is not None:
            return f"transfer CPU {cpu.value * 1e9:.3g} ns/B ({cpu.source}) not used: {left_out}"
        cores = config.host_cpu_cores
        where = self.host_cpu_cores.source if cores == self.host_cpu_cores.value else "--host-cores"
        return _cpu_phrase(cpu, cores, where)

    def effects_on(self) -> dict[str, Sourced[Any]]:
        """The settings beyond a bandwidth that are on (non-zero; a duplex ratio below full
        duplex), by their config name: ``latency_s``, ``flow_weight_cv``,
        ``comm_cpu_s_per_byte``, ``duplex_bps`` (its value the ratio) or instead
        ``duplex_interference``."""
        named = {
            "latency_s": self.latency_s,
            "flow_weight_cv": self.flow_weight_cv,
            "comm_cpu_s_per_byte": self.comm_cpu_s_per_byte,
        }
        on: dict[str, Sourced[Any]] = {
            key: value for key, value in named.items() if value.value > 0
        }
        if self.duplex_interference is not None:
            on["duplex_interference"] = self.duplex_interference
        elif self.duplex_ratio.value < FULL_DUPLEX:
            on["duplex_bps"] = self.duplex_ratio
        return on

    def effect_text(self, key: str) -> str:
        """One effect of :meth:`effects_on` as text with its source, e.g. ``latency 33.5 us
        (veth-1gbit)``."""
        value = self.effects_on()[key]
        if key == "latency_s":
            shown = f"latency {format_seconds(value.value)}"
        elif key == "flow_weight_cv":
            shown = f"flow weight cv {value.value:.3g}"
        elif key == "duplex_bps":
            shown = f"both directions {value.value:.3g}x one"
        elif key == "duplex_interference":
            shown = interference_text(value.value)
        else:
            cores = self.host_cpu_cores
            return _cpu_phrase(value, cores.value, cores.source)
        return f"{shown} ({value.source})"

    def to_dict(self, config: SimulationConfig) -> dict[str, Any]:
        """The JSON form: every value with its source, what ``config`` used, and the note."""
        ring = self.ring_bandwidth(config.workers) if config.ring_collective else None
        terms = self.ring_terms(config)
        if terms is not None:
            ring = self.ring_bytes_bandwidth(config)
        ring_cpu = self._ring_cpu_used(config)
        return {
            "bandwidth_bps": self.bandwidth_bps.to_dict(),
            "latency_s": self.latency_s.to_dict(),
            "flow_weight_cv": {
                **self.flow_weight_cv.to_dict(),
                "used": config.flow_weight_cv > 0,
            },
            "flow_weight_cv_push": None
            if self.flow_weight_cv_push is None
            else {
                **self.flow_weight_cv_push.to_dict(),
                "used": config.flow_weight_cv_push is not None,
            },
            "comm_cpu_s_per_byte": {
                **self.comm_cpu_s_per_byte.to_dict(),
                "used": config.comm_cpu_s_per_byte > 0,
            },
            "host_cpu_cores": self.host_cpu_cores.to_dict(),
            "duplex_ratio": {
                **self.duplex_ratio.to_dict(),
                "used": config.duplex_bps is not None,
            },
            "duplex_interference": None
            if self.duplex_interference is None
            else {
                "value": list(self.duplex_interference.value),
                "source": self.duplex_interference.source,
                "used": config.duplex_interference is not None,
            },
            # The ring's goodput, or with the ring terms the rate its bytes moved at
            "ring_bandwidth_bps": None
            if ring is None
            else {"value": ring[1], "workers_measured": ring[0], "source": self.profile},
            "ring_message_latency_s": None
            if terms is None or self.latency_s.is_option
            else {"value": terms.message_latency_s, "source": self.profile},
            "ring_cpu_s_per_byte": None
            if ring_cpu is None
            else {"value": ring_cpu, "source": self.profile},
            "profile": self.profile,
            "note": self.note,
        }


def _not_one_server(config: SimulationConfig) -> str:
    """The option that made ``config`` other than one parameter server's link."""
    return f"--arch {config.arch}" if config.arch != "ps" else f"--servers {config.servers}"


def ring_parse_alpha(s_per_byte: float, workers: int) -> float:
    """The simulator's parsing cost per byte of a layer for a ring rank's CPU ``s_per_byte``
    per byte it sends or receives: each sends and receives 2(W-1)/W of the layer's bytes."""
    return s_per_byte * 4 * (workers - 1) / workers


def _cpu_phrase(cost: Sourced[float], cores: float | None, cores_source: str) -> str:
    """``transfer CPU 38 ns/B (--comm-cpu) on 2 cores (--host-cores)``, one source if both
    came from the same place."""
    ns = f"transfer CPU {cost.value * 1e9:.3g} ns/B"
    if cores is None:
        return f"{ns} ({cost.source})"
    if cores_source == cost.source:
        return f"{ns} on {cores:g} cores ({cost.source})"
    return f"{ns} ({cost.source}) on {cores:g} cores ({cores_source})"


def _unless_default(value: Sourced[float]) -> str:
    return "" if value.source == DEFAULT_SOURCE else f" ({value.source})"


def with_traces(link: LinkSettings, traces: Sequence[Trace]) -> LinkSettings:
    """``link`` for replaying ``traces``: whether every one of them was measured beside a real
    parameter server (``LinkSettings.trace_beside_transfers``)."""
    beside = bool(traces) and all(measured_transfers(trace) for trace in traces)
    return dataclasses.replace(link, trace_beside_transfers=beside)
