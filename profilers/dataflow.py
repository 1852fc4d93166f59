"""The model's real dataflow graph, from ``torch.fx``: which computation nodes there are, which
nodes feed which, and which parameters each node owns.

A *layer* of the trace is an fx call node (a module call such as a convolution, a function such as
a residual ``add`` or a ``cat`` joining parallel branches, or a tensor method) that produces a
tensor. Call nodes that produce something else (``x.size(0)``, a tuple before it is indexed) are
not layers: they are folded into the dataflow, so a layer's inputs are its nearest layer
ancestors. The layers' order is fx's, which is the order the forward pass executes them.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.fx as fx
from torch import nn

from simcore.errors import ProfilingError
from simcore.trace.model import Layer, ParamTensor

CALL_OPS = frozenset({"call_module", "call_function", "call_method"})


@dataclass(frozen=True)
class LayerNode:
    """One layer: its fx node name, type, input layers and the parameters it owns."""

    name: str
    module_type: str
    inputs: tuple[str, ...]
    params: tuple[tuple[str, nn.Parameter], ...]  # (qualified name, tensor), first use only

    def to_layer(self) -> Layer:
        return Layer(
            name=self.name,
            module_type=self.module_type,
            params=tuple(
                ParamTensor(
                    name=qualified,
                    shape=tuple(int(d) for d in p.shape),
                    dtype=str(p.dtype).removeprefix("torch."),
                    nbytes=p.numel() * p.element_size(),
                )
                for qualified, p in self.params
            ),
        )


def trace_graph(model: nn.Module, model_name: str) -> fx.GraphModule:
    """``torch.fx.symbolic_trace(model)``, with a clear error when the model cannot be traced."""
    try:
        return fx.symbolic_trace(model)
    except Exception as err:  # fx raises many types (TraceError, TypeError, NotImplementedError)
        raise ProfilingError(
            f"model {model_name!r}: torch.fx cannot trace its forward ({type(err).__name__}: "
            f"{err}); the profiler reads the dataflow graph with torch.fx, so forward must not "
            "branch on tensor values"
        ) from err


def layer_nodes(gm: fx.GraphModule, tensor_nodes: Iterable[str]) -> list[LayerNode]:
    """The layers of ``gm``, in execution order.

    ``tensor_nodes`` are the names of the call nodes whose output was seen to contain a tensor
    when the graph ran (the profiler records them on its first step).
    """
    is_layer = set(tensor_nodes)
    nodes = [n for n in gm.graph.nodes if n.op in CALL_OPS and n.name in is_layer]
    owners = _param_owners(gm, is_layer)
    modules = dict(gm.named_modules())
    layers = []
    for node in nodes:
        layers.append(
            LayerNode(
                name=node.name,
                module_type=_module_type(node, modules),
                inputs=tuple(layer_inputs(node, is_layer)),
                params=tuple(owners.get(node.name, ())),
            )
        )
    return layers


def _module_type(node: fx.Node, modules: Mapping[str, nn.Module]) -> str:
    if node.op == "call_module":
        return type(modules[str(node.target)]).__name__
    if node.op == "call_method":
        return str(node.target)
    if node.target is operator.getitem:
        return "getitem"
    return str(getattr(node.target, "__name__", node.target))


def layer_inputs(node: fx.Node, is_layer: set[str]) -> list[str]:
    """Nearest layer ancestors of ``node``, looking through non-layer nodes; in first-seen order."""
    found: list[str] = []
    stack = list(reversed(node.all_input_nodes))
    seen: set[str] = set()
    while stack:
        src = stack.pop()
        if src.name in seen:
            continue
        seen.add(src.name)
        if src.op in CALL_OPS and src.name in is_layer:
            found.append(src.name)
        else:  # placeholders and get_attr end here; folded call nodes pass their inputs on
            stack.extend(reversed(src.all_input_nodes))
    return found


def _param_owners(
    gm: fx.GraphModule, is_layer: set[str]
) -> dict[str, list[tuple[str, nn.Parameter]]]:
    """For each layer, the trained parameters it is the first (in execution order) to use.

    A module called at several nodes, or a parameter read with ``get_attr`` by several nodes,
    is listed once, under the first layer that uses it. Frozen parameters (``requires_grad``
    off, e.g. a pretrained backbone under a trained head) are left out: they get no gradient
    to push and never change, so no training moves them.
    """
    modules = dict(gm.named_modules())
    claimed: set[int] = set()
    owners: dict[str, list[tuple[str, nn.Parameter]]] = {}
    for node in gm.graph.nodes:
        if node.op not in CALL_OPS or node.name not in is_layer:
            continue
        for qualified, param in _params_used(node, modules, gm):
            if id(param) in claimed or not param.requires_grad:
                continue
            claimed.add(id(param))
            owners.setdefault(node.name, []).append((qualified, param))
    return owners


def _params_used(
    node: fx.Node, modules: Mapping[str, nn.Module], gm: fx.GraphModule
) -> list[tuple[str, nn.Parameter]]:
    used: list[tuple[str, nn.Parameter]] = []
    if node.op == "call_module":
        prefix = str(node.target)
        used.extend((f"{prefix}.{n}", p) for n, p in modules[prefix].named_parameters())
    for src in _attr_ancestors(node):
        value = fetch_attr(gm, str(src.target))
        if isinstance(value, nn.Parameter):
            used.append((str(src.target), value))
    return used


def _attr_ancestors(node: fx.Node) -> list[fx.Node]:
    """``get_attr`` nodes that feed ``node`` directly (functional use of a parameter)."""
    return [src for src in node.all_input_nodes if src.op == "get_attr"]


def fetch_attr(gm: fx.GraphModule, target: str) -> object:
    """The module attribute a ``get_attr`` node's dotted ``target`` names."""
    obj: object = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def tensors_in(value: object) -> list[torch.Tensor]:
    """The tensors in a node's output (a tensor, or a tuple/list/dict holding tensors)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, Mapping):
        return [t for v in value.values() for t in tensors_in(v)]
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [t for v in value for t in tensors_in(v)]
    return []
