"""A small transformer encoder: many small layers, residual joins and matrix products between
activations, unlike the convolutional and fully connected built-ins.

Tokens arrive as feature vectors (a sequence of 16 tokens of 32 features, as from a patch or
frame embedding computed elsewhere), so that the synthetic inputs stay float tensors like every
other built-in's; a linear embedding maps them to the model width.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class SelfAttention(nn.Module):
    """Multi-head scaled dot-product self-attention (Vaswani et al. 2017, section 3.2), with one
    projection for queries, keys and values and one for the output.

    Written out rather than ``nn.MultiheadAttention`` so that each projection, product and
    softmax is a layer of its own in the trace (torch.fx sees through this forward).
    """

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"width {width} is not a multiple of heads {heads}")
        self.heads = heads
        self.head_width = width // heads
        self.scale = 1.0 / math.sqrt(self.head_width)
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens = x.shape[0], x.shape[1]
        qkv = self.qkv(x).reshape(batch, tokens, 3, self.heads, self.head_width)
        qkv = qkv.permute(2, 0, 3, 1, 4)  # (q/k/v, batch, heads, tokens, head width)
        scores = torch.matmul(qkv[0], qkv[1].transpose(-2, -1)) * self.scale
        mixed = torch.matmul(torch.softmax(scores, dim=-1), qkv[2])
        return self.out(mixed.transpose(1, 2).reshape(batch, tokens, -1))


class EncoderBlock(nn.Module):
    """Pre-norm encoder block: x + attention(norm(x)), then x + feed-forward(norm(x))."""

    def __init__(self, width: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attention = SelfAttention(width, heads)
        self.norm2 = nn.LayerNorm(width)
        self.ff1 = nn.Linear(width, hidden)
        self.act = nn.GELU()
        self.ff2 = nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.ff2(self.act(self.ff1(self.norm2(x))))


class TinyTransformer(nn.Module):
    """Linear token embedding plus learned positions, ``blocks`` pre-norm encoder blocks, a final
    norm, mean pooling over the tokens and a linear classifier."""

    def __init__(
        self,
        num_classes: int = 10,
        tokens: int = 16,
        features: int = 32,
        width: int = 128,
        heads: int = 4,
        hidden: int = 256,
        blocks: int = 2,
    ) -> None:
        super().__init__()
        self.embed = nn.Linear(features, width)
        self.position = nn.Parameter(torch.randn(tokens, width) * 0.02)
        self.blocks = nn.Sequential(*(EncoderBlock(width, heads, hidden) for _ in range(blocks)))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.blocks(self.embed(x) + self.position)
        return self.head(self.norm(h).mean(dim=1))


def transformer(num_classes: int = 10) -> TinyTransformer:
    """The built-in ``transformer``: 2 blocks of width 128, 4 heads, 16 tokens of 32 features."""
    return TinyTransformer(num_classes=num_classes)
