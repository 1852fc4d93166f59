"""Synthetic batches for models whose input is token ids, and models with frozen parameters.

A language model's first layer looks its input up in an embedding table, so the profilers feed
it integer ids below the table's size; parameters that do not train (a frozen backbone) move no
bytes, so the trace leaves them out. Checked on the one-process profiler here; the distributed
runner's runs of the same shapes are in test_distributed_runner.py.
"""

from __future__ import annotations

import pytest
import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from profilers import profile_model
from profilers.synthetic import probe_inputs, synthetic_inputs, token_vocab


class TiedLanguageModel(nn.Module):
    """Token ids -> embedding -> mean -> hidden -> logits over the vocabulary, whose output
    layer shares the embedding's table (weight tying, as many language models do)."""

    input_shape = (6,)

    def __init__(self, vocab: int = 40, dim: int = 8) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.mid = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, vocab, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.mid(self.emb(x).mean(1))))


class TwoTables(nn.Module):
    """The input indexes two tables (a module and a functional lookup): ids must fit both."""

    input_shape = (3,)

    def __init__(self) -> None:
        super().__init__()
        self.big = nn.Embedding(100, 4)
        self.small = nn.Parameter(torch.randn(7, 4))
        self.head = nn.Linear(4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head((self.big(x) + F.embedding(x, self.small)).sum(1))


class FrozenBackbone(nn.Module):
    """A frozen feature layer under a trained head (fine-tuning)."""

    input_shape = (12,)

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Linear(12, 16)
        self.backbone.requires_grad_(False)
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.backbone(x)))


class CastIdsModel(nn.Module):
    """Its input is cast, sliced and reshaped before the lookups (ids still): a bag of the
    first four ids in one table, every id in the other."""

    input_shape = (6,)

    def __init__(self) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(30, 4)
        self.table = nn.Embedding(50, 4)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ids = x.long()
        first = self.bag(ids[:, :4])
        every = self.table(ids.view(-1)).view(x.shape[0], 6, 4).mean(1)
        return self.head(torch.cat([first, every], 1))


class FeaturesIntoLinear(nn.Module):
    """Features reshaped into a linear layer, with an embedding of a computed index beside
    them: no token ids in its input (the index is not the input's values)."""

    input_shape = (2, 3)

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 4)
        self.pos = nn.Embedding(5, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        where = (x.sum(-1) > 0).long()
        return self.fc(x.flatten(1)) + self.pos(where).sum(1)


def test_a_model_on_features_gets_normal_floats() -> None:
    gm = fx.symbolic_trace(FrozenBackbone())
    assert token_vocab(gm) is None
    batch = synthetic_inputs(4, (12,), None, torch.Generator().manual_seed(0))
    assert batch.dtype == torch.float32 and batch.shape == (4, 12)
    assert probe_inputs((12,), None).dtype == torch.float32


def test_a_language_model_gets_token_ids_below_its_table() -> None:
    gm = fx.symbolic_trace(TiedLanguageModel(vocab=40))
    assert token_vocab(gm) == 40
    batch = synthetic_inputs(64, (6,), 40, torch.Generator().manual_seed(0))
    assert batch.dtype == torch.int64 and batch.shape == (64, 6)
    assert int(batch.min()) >= 0 and int(batch.max()) < 40
    assert len(batch.unique()) > 20  # drawn over the whole table, not one id
    again = synthetic_inputs(64, (6,), 40, torch.Generator().manual_seed(0))
    assert torch.equal(batch, again)  # the same seed, the same batch
    assert probe_inputs((6,), 40).dtype == torch.int64


def test_ids_fit_the_smallest_table_the_input_indexes() -> None:
    assert token_vocab(fx.symbolic_trace(TwoTables())) == 7


def test_ids_are_found_through_casts_slices_and_reshapes() -> None:
    assert token_vocab(fx.symbolic_trace(CastIdsModel())) == 30
    assert token_vocab(fx.symbolic_trace(FeaturesIntoLinear())) is None
    trace = profile_model(CastIdsModel(), batch_size=4, steps=2, warmup=1)
    assert trace.param_nbytes == (30 * 4 + 50 * 4 + 8 * 3 + 3) * 4


def test_a_tied_language_model_profiles_and_moves_its_table_once() -> None:
    model = TiedLanguageModel(vocab=40, dim=8)
    trace = profile_model(model, batch_size=4, steps=2, warmup=1)
    emb, mid = 40 * 8 * 4, (8 * 8 + 8) * 4  # float32 bytes; the output layer owns none
    assert trace.param_nbytes == emb + mid
    owners = {layer.name: layer.param_nbytes for layer in trace.layers if layer.params}
    assert owners == {"emb": emb, "mid": mid}


def test_frozen_parameters_move_no_bytes() -> None:
    trace = profile_model(FrozenBackbone(), batch_size=4, steps=2, warmup=1)
    owners = {layer.name: layer.param_nbytes for layer in trace.layers if layer.params}
    assert owners == {"head": (16 * 3 + 3) * 4}
    assert trace.param_nbytes == (16 * 3 + 3) * 4


@pytest.mark.parametrize("model", [TiedLanguageModel, FrozenBackbone])
def test_the_profiled_step_trains_the_model(model: type[nn.Module]) -> None:
    """The profiler's steps change the trained parameters and leave the frozen ones alone."""
    torch.manual_seed(0)
    module = model()
    before = {n: p.detach().clone() for n, p in module.named_parameters()}
    profile_model(module, batch_size=4, steps=2, warmup=1)
    for name, p in module.named_parameters():
        changed = not torch.equal(before[name], p.detach())
        assert changed == p.requires_grad, name
