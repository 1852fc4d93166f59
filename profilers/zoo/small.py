"""Small models for quick experiments: an MLP for MNIST-like and a CNN for CIFAR-10-like input."""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn


def mlp(num_classes: int = 10) -> nn.Sequential:
    """Multilayer perceptron for 1x28x28 input: Flatten, 784-1024-1024-``num_classes``, ReLU."""
    # Named children, so that trace layers read fc1, relu1, ... rather than _0, _1, ...
    return nn.Sequential(
        OrderedDict(
            flatten=nn.Flatten(),
            fc1=nn.Linear(28 * 28, 1024),
            relu1=nn.ReLU(inplace=True),
            fc2=nn.Linear(1024, 1024),
            relu2=nn.ReLU(inplace=True),
            fc3=nn.Linear(1024, num_classes),
        )
    )


class SmallCNN(nn.Module):
    """Three conv(3x3)-ReLU-maxpool stages (32, 64, 128 channels), then fc 2048-256-classes."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            *_conv_relu_pool(3, 32), *_conv_relu_pool(32, 64), *_conv_relu_pool(64, 128)
        )
        self.classifier = nn.Sequential(
            nn.Linear(128 * 4 * 4, 256), nn.ReLU(inplace=True), nn.Linear(256, num_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


def _conv_relu_pool(in_ch: int, out_ch: int) -> list[nn.Module]:
    return [nn.Conv2d(in_ch, out_ch, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2)]
