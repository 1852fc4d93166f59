"""VGG-11 as torchvision defines it (configuration "A", without batch norm)."""

from __future__ import annotations

import torch
from torch import nn

from profilers.zoo.resnet import init_conv_bn

VGG11_CFG: tuple[int | str, ...] = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")


class VGG(nn.Module):
    """torchvision's VGG: ``features`` (convs and pools), 7x7 average pool, 3-layer classifier."""

    def __init__(self, cfg: tuple[int | str, ...], num_classes: int) -> None:
        super().__init__()
        self.features = nn.Sequential(*_vgg_layers(cfg))
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            _uninitialized_linear(512 * 7 * 7, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(),
            _uninitialized_linear(4096, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(),
            _uninitialized_linear(4096, num_classes),
        )
        init_conv_bn(self)
        for m in self.classifier:
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.constant_(m.bias, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def _uninitialized_linear(in_features: int, out_features: int) -> nn.Linear:
    """A Linear layer whose default initialization is skipped (VGG re-initializes its own).

    Building ~120 M classifier weights twice costs about a second; the result is the same.
    """
    return nn.utils.skip_init(nn.Linear, in_features, out_features)


def _vgg_layers(cfg: tuple[int | str, ...]) -> list[nn.Module]:
    layers: list[nn.Module] = []
    in_ch = 3
    for v in cfg:
        if v == "M":
            layers.append(nn.MaxPool2d(2, stride=2))
        else:
            out_ch = int(v)
            layers += [nn.Conv2d(in_ch, out_ch, 3, padding=1), nn.ReLU(inplace=True)]
            in_ch = out_ch
    return layers


def vgg11(num_classes: int = 1000) -> VGG:
    return VGG(VGG11_CFG, num_classes)
