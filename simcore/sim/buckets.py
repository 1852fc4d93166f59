"""PyTorch DDP's gradient buckets: which gradients are all-reduced together, and in what order.

The rule is torch's own (``torch/csrc/distributed/c10d/reducer.cpp``,
``compute_bucket_assignment_by_size``, called by ``Reducer::rebuild_buckets`` after the first
iteration, and ``torch/nn/parallel/distributed.py``'s ``_BucketCapacityConfig``):

- the gradients are taken **in the order they became ready** in the first backward pass (DDP
  records it and rebuilds its buckets from it once; the buckets of later steps are those);
- gradients of one dtype (and device) fill one bucket at a time: a gradient is added, and when
  the bucket holds **at least** its limit of bytes it is closed, so a bucket may exceed its limit
  by its last gradient. The first bucket's limit is ``first_bucket_bytes`` (1 MiB, torch's
  ``_DEFAULT_FIRST_BUCKET_BYTES``), every later one's ``bucket_cap_bytes`` (``bucket_cap_mb``,
  25 MiB by default: torch's MB are MiB);
- what is left of each dtype's bucket is closed at the end, in the order the dtypes first
  appeared; buckets keep the order in which they were closed, which is the order in which
  their gradients become ready, and DDP launches their AllReduces in that order.

Since torch 2.x a ``bucket_cap_mb`` given explicitly is also the first bucket's limit (the
1 MiB first bucket only comes with the default); ``first_bucket_bytes`` says which one a run
used. The order of a layer's own gradients (which only matters where a bucket closes inside a
layer) follows how autograd computes them: a ``Linear`` layer's bias gradient is ready before
its weight's (``addmm``'s backward yields the bias directly and the weight through a
transpose), other layers' (convolutions, norms) in the order of their parameters, as torch
2.13's DDP records them for the built-in models (``tests/test_ddp_runner.py`` compares them).

Pure: layers and ops of a :class:`~simcore.trace.model.Trace` in, frozen records out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from simcore.errors import ConfigError
from simcore.trace.model import Layer, OpKind, Resource, Trace
from simcore.units import parse_size

MIB = 1 << 20
DEFAULT_BUCKET_CAP_BYTES = 25 * MIB  # torch's bucket_cap_mb=25 (MiB)
DEFAULT_FIRST_BUCKET_BYTES = 1 * MIB  # torch's _DEFAULT_FIRST_BUCKET_BYTES

# Module types whose bias gradient autograd makes ready before the weight's (see the module).
_BIAS_FIRST = frozenset({"Linear", "linear", "LazyLinear", "Bilinear"})


@dataclass(frozen=True, slots=True)
class GradientTensor:
    """One parameter's gradient: its layer, its name, its bytes and dtype."""

    layer: str
    name: str
    nbytes: int
    dtype: str


@dataclass(frozen=True)
class Bucket:
    """One DDP bucket: the gradients all-reduced together, in the order they were added."""

    index: int
    tensors: tuple[GradientTensor, ...]

    @cached_property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)

    @cached_property
    def layers(self) -> tuple[str, ...]:
        """The layers with a gradient in this bucket, in the order they were added."""
        return tuple(dict.fromkeys(t.layer for t in self.tensors))

    @property
    def label(self) -> str:
        return f"bucket{self.index}"


def layer_gradients(layer: Layer, nbytes: int | None = None) -> list[GradientTensor]:
    """``layer``'s gradients in the order autograd makes them ready (see the module docstring).

    ``nbytes``: the bytes the trace's push of the layer carries, when they differ from its
    parameter tensors (a trace without tensors): one gradient of that size.
    """
    params = list(layer.params)
    if nbytes is not None and nbytes != sum(p.nbytes for p in params):
        dtype = params[0].dtype if params else "float32"
        return [GradientTensor(layer.name, layer.name, nbytes, dtype)]
    if layer.module_type in _BIAS_FIRST:
        params.reverse()
    return [GradientTensor(layer.name, p.name, p.nbytes, p.dtype) for p in params]


def trace_gradients(trace: Trace) -> list[GradientTensor]:
    """Every gradient a DDP worker reduces, in the order the trace's backward makes them ready.

    A layer's gradients are ready when its push may start (the push waits for its backward);
    the pushes are taken in trace order, which the profiler writes in the order the backward
    pass ran (FORMAT.md). Layers without a push (no trained parameters) have no gradient.
    """
    layers = trace.layer_by_name
    out: list[GradientTensor] = []
    for op in trace.ops:
        if op.resource is Resource.UPLINK and op.kind is OpKind.PUSH and op.layer is not None:
            out.extend(layer_gradients(layers[op.layer], op.nbytes))
    return out


def assign_buckets(
    gradients: Sequence[GradientTensor],
    bucket_cap_bytes: int = DEFAULT_BUCKET_CAP_BYTES,
    first_bucket_bytes: int = DEFAULT_FIRST_BUCKET_BYTES,
) -> tuple[Bucket, ...]:
    """DDP's buckets of ``gradients`` (given in the order they become ready).

    Raises
    ------
    ConfigError : a limit that is not a positive whole number of bytes.
    """
    for name, value in (
        ("bucket_cap_bytes", bucket_cap_bytes),
        ("first_bucket_bytes", first_bucket_bytes),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(f"{name}: must be a whole number of bytes > 0, got {value!r}")
    open_buckets: dict[str, list[GradientTensor]] = {}
    sizes: dict[str, int] = {}
    closed_count: dict[str, int] = {}  # per dtype: buckets closed so far (picks the limit)
    closed: list[list[GradientTensor]] = []
    for tensor in gradients:
        key = tensor.dtype
        bucket = open_buckets.setdefault(key, [])
        bucket.append(tensor)
        sizes[key] = sizes.get(key, 0) + tensor.nbytes
        limit = first_bucket_bytes if closed_count.get(key, 0) == 0 else bucket_cap_bytes
        if sizes[key] >= limit:
            closed.append(bucket)
            open_buckets[key] = []
            sizes[key] = 0
            closed_count[key] = closed_count.get(key, 0) + 1
    closed.extend(b for b in open_buckets.values() if b)
    return tuple(Bucket(i, tuple(b)) for i, b in enumerate(closed))


def trace_buckets(
    trace: Trace,
    bucket_cap_bytes: int = DEFAULT_BUCKET_CAP_BYTES,
    first_bucket_bytes: int = DEFAULT_FIRST_BUCKET_BYTES,
) -> tuple[Bucket, ...]:
    """The buckets a DDP worker training ``trace``'s model would all-reduce, in launch order.

    Raises
    ------
    ConfigError : the trace has no gradients to reduce (no layer with a push), or a limit is bad.
    """
    gradients = trace_gradients(trace)
    if not gradients:
        raise ConfigError(
            f"arch: DDP needs gradients to all-reduce; trace {trace.source} (model "
            f"{trace.metadata.model_name}) has no layer with parameters"
        )
    return assign_buckets(gradients, bucket_cap_bytes, first_bucket_bytes)


def parse_bucket_size(text: str, option: str) -> int:
    """A bucket limit in bytes; a plain number is MiB, as torch's ``bucket_cap_mb``."""
    try:
        return parse_size(text, name=option, default_unit="MiB")
    except ConfigError as err:
        if "is not a size" not in str(err):
            raise
        raise ConfigError(
            f"{option}: {text!r} is not a size; give e.g. 25MiB, 512KiB or 25 (a plain number "
            "is MiB, as torch's bucket_cap_mb)"
        ) from None
