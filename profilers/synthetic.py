"""The synthetic inputs the profilers feed a model: normal features, or token ids where the
model's input indexes an embedding.

Training speed does not depend on the values a batch holds, only on its shape and type, so the
profilers make batches up. A language model's input is a tensor of token ids that its first
layer looks up in an ``nn.Embedding``; normal floats there fail (embeddings take integer
indices), and ids beyond the table's rows too. Such a model gets ids drawn uniformly below the
smallest table its input indexes.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from profilers.dataflow import fetch_attr


def token_vocab(gm: fx.GraphModule) -> int | None:
    """The number of rows of the smallest embedding table the graph's input indexes directly
    (an ``nn.Embedding`` module or ``F.embedding`` called on it); None: the input is
    features, not token ids."""
    modules = dict(gm.named_modules())
    sizes: list[int] = []
    for placeholder in (n for n in gm.graph.nodes if n.op == "placeholder"):
        for user in placeholder.users:
            if user.op == "call_module":
                module = modules.get(str(user.target))
                if isinstance(module, nn.Embedding) and user.args and user.args[0] is placeholder:
                    sizes.append(module.num_embeddings)
            elif user.op == "call_function" and user.target is F.embedding:
                weight = user.args[1] if len(user.args) > 1 else user.kwargs.get("weight")
                rows = _rows_of(gm, weight)
                if rows is not None and user.args[0] is placeholder:
                    sizes.append(rows)
    return min(sizes) if sizes else None


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
