"""The built-in architectures, one module per family; :mod:`profilers.models` registers them."""

from profilers.zoo.googlenet import GoogLeNet
from profilers.zoo.resnet import CifarResNet, ResNet, resnet8, resnet18, resnet50
from profilers.zoo.small import SmallCNN, mlp
from profilers.zoo.transformer import TinyTransformer, transformer
from profilers.zoo.vgg import VGG, vgg11

__all__ = [
    "VGG",
    "CifarResNet",
    "GoogLeNet",
    "ResNet",
    "SmallCNN",
    "TinyTransformer",
    "mlp",
    "resnet8",
    "resnet18",
    "resnet50",
    "transformer",
    "vgg11",
]
