"""The model and the learnable synthetic task every rank builds identically from the config.

- **Model.** Built in every process with ``torch.manual_seed(seed)``, so all ranks start from the
  same parameters; ``torch.fx`` gives its layers exactly as the per-layer profiler sees them
  (:mod:`profilers.dataflow`), so timestamps and trace ops use the same layer names.
- **Task.** A fixed random *teacher* labels every input: the input is averaged over at most
  :data:`TEACHER_FEATURES` contiguous chunks of its flattened values and multiplied by a random
  matrix; the label is the largest output. Labels are a linear function of the input, so any of
  the classifiers can learn them and the loss really decreases (random labels would not).
- **Batches.** Worker ``w``'s batch of step ``n`` depends only on ``(seed, w, n)``, not on the
  number of workers, so a synchronous run on W workers can be replayed in one process on the
  concatenated batches (:func:`synthetic_batch`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from profilers import models
from profilers.dataflow import (
    CALL_OPS,
    LayerNode,
    layer_inputs,
    layer_nodes,
    tensors_in,
    trace_graph,
)
from profilers.distributed.config import ModelRef, RunConfig
from profilers.layer_profiler import LOSS_LAYER
from profilers.synthetic import probe_inputs, synthetic_inputs, token_vocab
from simcore.errors import ConfigError

__all__ = ["TEACHER_FEATURES", "ModelSetup", "ParamLayer", "build_setup", "synthetic_batch"]

TEACHER_FEATURES = 64  # input chunks the teacher looks at; keeps it small for 224x224 images
_TEACHER_STREAM = 0x7EAC  # separates the teacher's random stream from the batches'


@dataclass(frozen=True)
class ParamLayer:
    """A layer that owns parameters: the unit of one pull, one push and one update.

    ``index`` is its position among parameterized layers in forward order; it is the message tag.
    """

    index: int
    name: str
    params: tuple[nn.Parameter, ...]
    param_names: tuple[str, ...]  # qualified, as in the model's ``named_parameters``

    @property
    def numel(self) -> int:
        return sum(p.numel() for p in self.params)

    @property
    def nbytes(self) -> int:
        return sum(p.numel() * p.element_size() for p in self.params)

    def flat_params(self) -> torch.Tensor:
        """A contiguous copy of the parameters, flattened in ``params`` order."""
        return torch.cat([p.detach().reshape(-1) for p in self.params])

    def flat_grads(self) -> torch.Tensor:
        """The gradients, flattened like :meth:`flat_params` (zeros where a grad is missing)."""
        return torch.cat(
            [
                (p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                for p in self.params
            ]
        )

    def load_params(self, flat: torch.Tensor) -> None:
        """Copy ``flat`` into the parameters in place (no autograd history)."""
        offset = 0
        with torch.no_grad():
            for p in self.params:
                n = p.numel()
                p.copy_(flat[offset : offset + n].view_as(p))
                offset += n

    def load_grads(self, flat: torch.Tensor) -> None:
        """Set the parameters' ``.grad`` from ``flat`` (copies)."""
        offset = 0
        for p in self.params:
            n = p.numel()
            p.grad = flat[offset : offset + n].view_as(p).clone()
            offset += n


@dataclass
class ModelSetup:
    """One rank's model, its fx graph and layers, and the task's shapes and teacher."""

    name: str
    module: nn.Module
    gm: fx.GraphModule
    layers: list[LayerNode]  # every layer in forward order, the loss last
    param_layers: list[ParamLayer]
    input_shape: tuple[int, ...]
    num_classes: int
    teacher: torch.Tensor  # (features, classes)
    device: torch.device  # where the model lives
    vocab: int | None = None  # the input is token ids below this (synthetic.token_vocab)

    @property
    def layer_inputs(self) -> dict[str, tuple[str, ...]]:
        return {layer.name: layer.inputs for layer in self.layers}


def build_setup(config: RunConfig, device: torch.device | None = None) -> ModelSetup:
    """Build the model (seeded), trace it with fx and find its layers, as every rank does.

    Raises
    ------
    ConfigError : unknown model, bad factory, missing input shape.
    ProfilingError : the model cannot be traced by ``torch.fx``.
    """
    torch.manual_seed(config.seed)
    module, name, shape, classes = _resolve(config.model, config.input_shape, config.num_classes)
    target = device or torch.device("cpu")
    module.to(target).train()
    gm = trace_graph(module, name)
    vocab = token_vocab(gm)
    probe = probe_inputs(shape, vocab).to(target)
    tensor_nodes, output = _tensor_nodes(gm, probe)
    if classes is None:
        classes = int(output.shape[-1])
    found = layer_nodes(gm, tensor_nodes)
    out_node = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    loss = LayerNode(
        LOSS_LAYER, "cross_entropy", tuple(layer_inputs(out_node, set(tensor_nodes))), ()
    )
    layers = [*found, loss]
    with_params = [layer for layer in layers if layer.params]
    param_layers = [
        ParamLayer(
            i, layer.name, tuple(p for _, p in layer.params), tuple(n for n, _ in layer.params)
        )
        for i, layer in enumerate(with_params)
    ]
    if not param_layers:
        raise ConfigError(
            f"model {name!r}: no trained parameters (every one has requires_grad off, or it has "
            "none): a distributed run would have nothing to send"
        )
    teacher = _teacher(config.seed, shape, classes)
    return ModelSetup(
        name, module, gm, layers, param_layers, shape, classes, teacher, target, vocab
    )


def _resolve(
    ref: ModelRef, input_shape: Sequence[int] | None, num_classes: int | None
) -> tuple[nn.Module, str, tuple[int, ...], int | None]:
    if isinstance(ref, str) and ":" not in ref:
        spec = models.get_spec(ref)
        module = models.build_model(ref, num_classes)
        shape = tuple(input_shape) if input_shape else spec.input_shape
        return module, spec.name, shape, num_classes or spec.num_classes
    factory = models.load_factory(ref) if isinstance(ref, str) else ref
    module = models.instantiate(factory)
    name = ref if isinstance(ref, str) else type(module).__name__
    attr = getattr(module, "input_shape", None)
    if input_shape:
        shape = tuple(input_shape)
    elif attr is not None:
        shape = tuple(int(d) for d in attr)
    else:
        raise ConfigError(
            f"input_shape: required for model {name!r} (it has no `input_shape` attribute)"
        )
    return module, name, shape, num_classes or getattr(module, "num_classes", None)


class _Probe(fx.Interpreter):
    """Runs the graph once and notes which call nodes return tensors (those are layers)."""

    def __init__(self, gm: fx.GraphModule) -> None:
        super().__init__(gm)
        self.tensor_nodes: list[str] = []

    def run_node(self, n: fx.Node) -> Any:
        result = super().run_node(n)
        if n.op in CALL_OPS and tensors_in(result):
            self.tensor_nodes.append(n.name)
        return result


def _tensor_nodes(gm: fx.GraphModule, probe: torch.Tensor) -> tuple[list[str], torch.Tensor]:
    interpreter = _Probe(gm)
    was_training = gm.training
    gm.eval()  # one example through batch norm in training mode would fail
    with torch.no_grad():
        output = interpreter.run(probe)
    gm.train(was_training)
    if not isinstance(output, torch.Tensor) or output.dim() != 2:
        raise ConfigError("model: its output must be (batch, classes) to train it as a classifier")
    return interpreter.tensor_nodes, output


def _teacher(seed: int, shape: tuple[int, ...], classes: int) -> torch.Tensor:
    features = min(TEACHER_FEATURES, int(np.prod(shape)))
    generator = torch.Generator().manual_seed(_seed_of(seed, _TEACHER_STREAM, 0))
    return torch.randn((features, classes), generator=generator)


def _seed_of(seed: int, worker: int, step: int) -> int:
    """An independent 63-bit seed per (seed, worker, step) via numpy's SeedSequence."""
    return int(np.random.SeedSequence([seed, worker, step]).generate_state(1, np.uint64)[0] >> 1)


def synthetic_batch(
    setup: ModelSetup, seed: int, worker: int, step: int, batch_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Worker ``worker``'s (inputs, labels) of step ``step``: normal inputs, teacher labels.

    The same arguments always give the same batch, whatever the number of workers.
    """
    generator = torch.Generator().manual_seed(_seed_of(seed, worker, step))
    inputs = synthetic_inputs(batch_size, setup.input_shape, setup.vocab, generator)
    flat = inputs.reshape(batch_size, 1, -1).float()  # token ids as numbers: labels follow them
    features = F.adaptive_avg_pool1d(flat, setup.teacher.shape[0])
    labels = (features.reshape(batch_size, -1) @ setup.teacher).argmax(dim=1)
    return inputs, labels
