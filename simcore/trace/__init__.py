"""The trace: sgdsim's versioned boundary between the profiler and the simulator.

See ``simcore/trace/FORMAT.md`` for the file format.
"""

from simcore.trace.graph import critical_path, longest_path_to_end, step_graph
from simcore.trace.model import (
    SCHEMA_VERSION,
    SUPPORTED_SCHEMA_VERSIONS,
    Layer,
    Op,
    OpKind,
    ParamTensor,
    Resource,
    StepProfile,
    Trace,
    TraceMetadata,
)
from simcore.trace.parse import trace_from_dict, trace_to_dict

__all__ = [
    "SCHEMA_VERSION",
    "SUPPORTED_SCHEMA_VERSIONS",
    "Layer",
    "Op",
    "OpKind",
    "ParamTensor",
    "Resource",
    "StepProfile",
    "Trace",
    "TraceMetadata",
    "critical_path",
    "longest_path_to_end",
    "step_graph",
    "trace_from_dict",
    "trace_to_dict",
]
