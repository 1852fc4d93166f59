"""The one mapping from library parameter names to the options a user types, for every command.

The library (:class:`~simcore.sim.SimulationConfig`, :class:`~simcore.topology.Topology`, the
advisor) names its parameters in its errors (``warmup_steps: ...``, ``use mode='sync'``); the
command line's user knows them as options (``--warmup``, ``--mode sync``). :func:`user_message`
rewrites an error's text in the user's words. ``sgdsim``'s error handler applies it to every
command's errors, and the scenarios' to theirs, so no command keeps a mapping of its own.

An error about a file (``cluster.json: bandwidth_bps: ...``) names the file's own fields, as the
user wrote them in the file: it is left as it is.
"""

from __future__ import annotations

import re

# Library parameter -> the option that sets it, the same in every command that has it.
OPTION_OF: dict[str, str] = {
    # SimulationConfig
    "workers": "--workers",
    "bandwidth_bps": "--bandwidth",
    "arch": "--arch",
    "mode": "--mode",
    "sharing": "--sharing",
    "steps": "--steps",
    "warmup_steps": "--warmup",
    "seed": "--seed",
    "replications": "--replications",
    "batches": "--batches",
    "flow_cap_bps": "--flow-cap",
    "cap_mode": "--cap-mode",
    "scheduler": "--scheduler",
    "window_bytes": "--http2-window",
    "parse_alpha_s_per_byte": "--parse-alpha",
    "parse_beta_s": "--parse-beta",
    "parse_placement": "--parse-placement",
    "ring_segment_bytes": "--ring-segment",
    "comm_thread_s_per_step": "--comm-thread",
    "latency_s": "--latency",
    "servers": "--servers",
    "placement": "--placement",
    "worker_bandwidth_bps": "--worker-bandwidth",
    "speed_factors": "--speed",
    "worker_types": "--worker-types",
    "jitter": "--jitter",
    "jitter_cv": "--jitter-cv",
    "timeline": "--timeline",
    "overlap": "--overlap",
    "devices_per_host": "--devices-per-host",
    "intra_bandwidth_bps": "--intra-bandwidth",
    "server_host": "--server-host",
    "server_nic": "--own-nics",
    "colocated_workers": "--colocated",
    "host_cpu_cores": "--host-cores",
    "worker_cpu_cores": "--worker-cores",
    "shared_nic": "--own-nics",
    "flow_weight_cv": "--flow-weight-cv",
    "flow_weight_cv_push": "--flow-weight-cv",
    "duplex_bps": "--duplex",
    "duplex_interference": "--duplex-interference",
    "comm_cpu_s_per_byte": "--comm-cpu",
    "bucket_cap_bytes": "--bucket-cap",
    "first_bucket_bytes": "--first-bucket",
    "collective": "--collective",
    "ddp_compression": "--comm-hook",
    "bucket_copy_s_per_byte": "--bucket-copy",
    "gradient_as_bucket_view": "--gradient-as-bucket-view",
    # Topology (a host type from --topology; the options given explicitly win over it)
    "hosts": "--hosts",
    "nic_bandwidth_bps": "--worker-bandwidth",
    "server_bandwidth_bps": "--bandwidth",
    # The analytic models' Cluster (analyze)
    "counts": "--workers",
    # The advisor
    "machines": "--machines",
    "price_per_machine_hour": "--price",
    "confirm_top": "--confirm",
    "sim_steps": "--steps",
    "trace": "TRACE",
    # validate's real runs (profilers.distributed)
    "warmup": "--warmup",
    "repetitions": "--repetitions",
    "workers_max": "--workers-max",
    "batch_size": "--batch-size",
    "model": "--model",
    # the profilers' models
    "num_classes": "--num-classes",
    "input_shape": "--input-shape",
}

# ``name=value`` as a repr in a library message: ``mode='sync'``, ``servers=1``.
_ASSIGNMENT = re.compile(r"(?<![\w-])([a-z][a-z_]*)=('[^']*'|\"[^\"]*\"|[^\s,;)]+)")
# A parameter whose name has an underscore, anywhere (a single word like ``steps`` is prose).
_UNDERSCORED = re.compile(r"(?<![\w./-])([a-z]+(?:_[a-z]+)+)(?![\w.-])")


def user_message(message: str) -> str:
    """``message`` with library parameter names replaced by the options that set them.

    The leading ``name:`` becomes ``--option:``; ``name='value'`` becomes ``--option value``;
    an underscored parameter name anywhere becomes its option. A message about a file (its
    leading part is neither a parameter nor an option) is returned unchanged.
    """
    head, sep, rest = message.partition(":")
    if not sep:
        return message
    if head in OPTION_OF:
        head = OPTION_OF[head]
    elif not head.startswith("-"):
        return message
    return f"{head}:{_body(rest)}"


def _body(text: str) -> str:
    def assignment(match: re.Match[str]) -> str:
        name, value = match.group(1), match.group(2)
        if name not in OPTION_OF:
            return match.group(0)
        return f"{OPTION_OF[name]} {value.strip(chr(39) + chr(34))}"

    def underscored(match: re.Match[str]) -> str:
        return OPTION_OF.get(match.group(1), match.group(1))

    return _UNDERSCORED.sub(underscored, _ASSIGNMENT.sub(assignment, text))
