"""The built-in architectures, one module per family; :mod:`profilers.models` registers them."""

from profilers.zoo.googlenet import GoogLeNet
from profilers.zoo.resnet import ResNet, resnet18, resnet50
from profilers.zoo.small import SmallCNN, mlp
from profilers.zoo.vgg import VGG, vgg11

__all__ = ["VGG", "GoogLeNet", "ResNet", "SmallCNN", "mlp", "resnet18", "resnet50", "vgg11"]
