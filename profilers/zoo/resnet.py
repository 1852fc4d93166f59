"""ResNet-18 and ResNet-50 as torchvision defines them (v1.5: the stride sits on the 3x3 conv)."""

from __future__ import annotations

import torch
from torch import nn


def _conv3x3(in_ch: int, out_ch: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1, bias=False)


def _conv1x1(in_ch: int, out_ch: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with a residual addition (ResNet-18/34)."""

    expansion = 1

    def __init__(self, in_ch: int, ch: int, stride: int, downsample: nn.Module | None) -> None:
        super().__init__()
        self.conv1 = _conv3x3(in_ch, ch, stride)
        self.bn1 = nn.BatchNorm2d(ch)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = _conv3x3(ch, ch)
        self.bn2 = nn.BatchNorm2d(ch)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided), 1x1 expand by 4, with a residual addition (ResNet-50+)."""

    expansion = 4

    def __init__(self, in_ch: int, ch: int, stride: int, downsample: nn.Module | None) -> None:
        super().__init__()
        self.conv1 = _conv1x1(in_ch, ch)
        self.bn1 = nn.BatchNorm2d(ch)
        self.conv2 = _conv3x3(ch, ch, stride)
        self.bn2 = nn.BatchNorm2d(ch)
        self.conv3 = _conv1x1(ch, ch * self.expansion)
        self.bn3 = nn.BatchNorm2d(ch * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


Block = type[BasicBlock] | type[Bottleneck]


class ResNet(nn.Module):
    """torchvision's ResNet: 7x7 stem, max pool, four stages of blocks, average pool, fc."""

    def __init__(self, block: Block, layers: tuple[int, int, int, int], num_classes: int) -> None:
        super().__init__()
        self.in_ch = 64
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = self._stage(block, 64, layers[0], stride=1)
        self.layer2 = self._stage(block, 128, layers[1], stride=2)
        self.layer3 = self._stage(block, 256, layers[2], stride=2)
        self.layer4 = self._stage(block, 512, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)
        init_conv_bn(self)

    def _stage(self, block: Block, ch: int, n_blocks: int, stride: int) -> nn.Sequential:
        stage = _stage(block, self.in_ch, ch, n_blocks, stride)
        self.in_ch = ch * block.expansion
        return stage

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def _stage(block: Block, in_ch: int, ch: int, n_blocks: int, stride: int) -> nn.Sequential:
    """``n_blocks`` blocks of width ``ch`` after ``in_ch`` channels, the first with ``stride``
    and, where the shape changes, a 1x1 projection shortcut (torchvision's ``_make_layer``)."""
    out_ch = ch * block.expansion
    downsample = None
    if stride != 1 or in_ch != out_ch:
        downsample = nn.Sequential(_conv1x1(in_ch, out_ch, stride), nn.BatchNorm2d(out_ch))
    blocks = [block(in_ch, ch, stride, downsample)]
    blocks += [block(out_ch, ch, 1, None) for _ in range(1, n_blocks)]
    return nn.Sequential(*blocks)


def init_conv_bn(model: nn.Module) -> None:
    """torchvision's ResNet/VGG initialization: He normal (fan out) convs, BN weight 1 bias 0."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.constant_(m.bias, 0)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.constant_(m.weight, 1)
            nn.init.constant_(m.bias, 0)


def resnet18(num_classes: int = 1000) -> ResNet:
    return ResNet(BasicBlock, (2, 2, 2, 2), num_classes)


def resnet50(num_classes: int = 1000) -> ResNet:
    return ResNet(Bottleneck, (3, 4, 6, 3), num_classes)


class CifarResNet(nn.Module):
    """He et al. 2016 section 4.2's CIFAR ResNet (6n+2 layers): a 3x3 stem and three stages
    of ``n`` basic blocks at 16, 32 and 64 channels on 32x32 input, average pool, fc.

    Small (n = 1: 78k parameters) but with a residual join in every block, so that validation
    covers a dataflow graph that is not a chain without paying for ImageNet-sized transfers.
    """

    def __init__(self, n: int = 1, num_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = _conv3x3(3, 16)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = _stage(BasicBlock, 16, 16, n, stride=1)
        self.layer2 = _stage(BasicBlock, 16, 32, n, stride=2)
        self.layer3 = _stage(BasicBlock, 32, 64, n, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(64, num_classes)
        init_conv_bn(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet8(num_classes: int = 10) -> CifarResNet:
    return CifarResNet(1, num_classes)
