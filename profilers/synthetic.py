"""The synthetic inputs the profilers feed a model: normal features, or token ids where the
model's input indexes an embedding.

Training speed does not depend on the values a batch holds, only on its shape and type, so the
profilers make batches up. A language model's input is a tensor of token ids that its first
layer looks up in an ``nn.Embedding``; normal floats there fail (embeddings take integer
indices), and ids beyond the table's rows too. Such a model gets ids drawn uniformly below the
smallest table its input indexes.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from profilers.dataflow import fetch_attr

# Operations that keep a tensor of token ids a tensor of the same ids (casts, reshapes, slices):
# an input reaching an embedding through them is still token ids.
_ID_KEEPING_METHODS = frozenset(
    {
        "long",
        "int",
        "to",
        "type",
        "view",
        "reshape",
        "flatten",
        "squeeze",
        "unsqueeze",
        "contiguous",
        "transpose",
        "permute",
        "t",
        "clone",
        "detach",
    }
)
_ID_KEEPING_FUNCTIONS = frozenset(
    {
        operator.getitem,
        torch.reshape,
        torch.flatten,
        torch.squeeze,
        torch.unsqueeze,
        torch.transpose,
        torch.permute,
        torch.t,
    }
)


def token_vocab(gm: fx.GraphModule) -> int | None:
    """The number of rows of the smallest embedding table the graph's input indexes (an
    ``nn.Embedding`` or ``nn.EmbeddingBag`` module, or ``F.embedding``, called on the input
    itself or on it cast, reshaped or sliced); None: the input is features, not token ids."""
    modules = dict(gm.named_modules())
    sizes: list[int] = []
    for ids in _id_nodes(gm):
        for user in ids.users:
            if user.op == "call_module":
                module = modules.get(str(user.target))
                if isinstance(module, nn.Embedding | nn.EmbeddingBag) and _first_arg(user) is ids:
                    sizes.append(module.num_embeddings)
            elif user.op == "call_function" and user.target is F.embedding:
                weight = user.args[1] if len(user.args) > 1 else user.kwargs.get("weight")
                rows = _rows_of(gm, weight)
                if rows is not None and _first_arg(user) is ids:
                    sizes.append(rows)
    return min(sizes) if sizes else None


def _id_nodes(gm: fx.GraphModule) -> list[fx.Node]:
    """The inputs, and every node that holds their values as they were (_ID_KEEPING_*)."""
    found = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node in found:  # grows while it is walked: breadth first
        for user in node.users:
            keeps = (user.op == "call_method" and user.target in _ID_KEEPING_METHODS) or (
                user.op == "call_function" and user.target in _ID_KEEPING_FUNCTIONS
            )
            if keeps and _first_arg(user) is node and user not in found:
                found.append(user)
    return found


def _first_arg(node: fx.Node) -> object:
    return node.args[0] if node.args else node.kwargs.get("input")


def _rows_of(gm: fx.GraphModule, node: object) -> int | None:
    if not isinstance(node, fx.Node) or node.op != "get_attr":
        return None
    value = fetch_attr(gm, str(node.target))
    return int(value.shape[0]) if isinstance(value, torch.Tensor) else None


def synthetic_inputs(
    batch_size: int, shape: Sequence[int], vocab: int | None, generator: torch.Generator
) -> torch.Tensor:
    """A batch of ``batch_size`` examples of ``shape``: token ids below ``vocab`` (int64), or
    standard normal features when ``vocab`` is None."""
    size = (batch_size, *shape)
    if vocab is None:
        return torch.randn(size, generator=generator)
    return torch.randint(0, vocab, size, generator=generator)


def probe_inputs(shape: Sequence[int], vocab: int | None) -> torch.Tensor:
    """One example of zeros, of the type ``synthetic_inputs`` makes (to run the graph once)."""
    dtype = torch.float32 if vocab is None else torch.int64
    return torch.zeros((1, *shape), dtype=dtype)
