"""Built-in models to profile, their registry, and loading a user's model factory.

torchvision cannot be a dependency, so the image models are defined here, layer for layer as in
torchvision (same submodule names, such as ``layer1.0.conv1``, ``features.0`` or
``inception3a.branch1.conv``, and the same initialization), so that their parameter counts match
the published architectures exactly with the default 1000 classes:

==============  =============================================  ============  ==============
name            architecture                                   parameters    input
==============  =============================================  ============  ==============
``mlp``         784-1024-1024-10 perceptron with ReLU          1,863,690     1x28x28, 10
``cnn``         three conv-ReLU-maxpool stages and two fc      620,362       3x32x32, 10
``resnet18``    ResNet-18 (He et al. 2016), torchvision v1.5   11,689,512    3x224x224
``resnet50``    ResNet-50 (He et al. 2016), torchvision v1.5   25,557,032    3x224x224
``vgg11``       VGG-11, configuration "A" without batch norm   132,863,336   3x224x224
``inception``   GoogLeNet / Inception v1 without aux heads     6,624,904     3x224x224
==============  =============================================  ============  ==============

``mlp`` takes MNIST-like 1x28x28 images and ``cnn`` CIFAR-10-like 3x32x32 images, both with 10
classes; the others take ImageNet-like 3x224x224 images with 1000 classes. Inputs are given
without the batch dimension. Every model is traceable with ``torch.fx.symbolic_trace``: forward
passes have no data-dependent Python control flow, and parallel branches (residual additions,
Inception's four branches joined by ``torch.cat``) are separate dataflow paths in the graph.

A user model is named ``package.module:factory`` (see :func:`load_factory`), where ``factory`` is
an ``nn.Module`` subclass or a function that builds the model without arguments. The model it
returns may carry two optional attributes, which the profiler reads unless the command line
overrides them; class attributes are the easiest way::

    class Net(nn.Module):
        input_shape = (3, 32, 32)  # one example without the batch dimension (tuple of ints)
        num_classes = 10           # classes of the synthetic labels (int)

:func:`instantiate` builds the model and checks these attributes.
"""

from __future__ import annotations

import importlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from simcore.errors import ConfigError

__all__ = [
    "MODELS",
    "ModelSpec",
    "build_model",
    "get_spec",
    "instantiate",
    "load_factory",
]


# --- small models ---------------------------------------------------------------------------


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


# --- ResNet (torchvision v1.5: the stride sits on the 3x3 convolution) -----------------------


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
        _init_conv_bn(self)

    def _stage(self, block: Block, ch: int, n_blocks: int, stride: int) -> nn.Sequential:
        out_ch = ch * block.expansion
        downsample = None
        if stride != 1 or self.in_ch != out_ch:
            downsample = nn.Sequential(_conv1x1(self.in_ch, out_ch, stride), nn.BatchNorm2d(out_ch))
        blocks = [block(self.in_ch, ch, stride, downsample)]
        self.in_ch = out_ch
        blocks += [block(out_ch, ch, 1, None) for _ in range(1, n_blocks)]
        return nn.Sequential(*blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def _init_conv_bn(model: nn.Module) -> None:
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


# --- VGG-11 (configuration "A", no batch norm) ------------------------------------------------

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
        _init_conv_bn(self)
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


# --- GoogLeNet / Inception v1 (torchvision, aux_logits=False, transform_input=False) ---------


class BasicConv2d(nn.Module):
    """Convolution without bias, batch norm (eps 0.001), ReLU."""

    def __init__(self, in_ch: int, out_ch: int, kernel_size: int, **kwargs: Any) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_ch, out_ch, kernel_size, bias=False, **kwargs)
        self.bn = nn.BatchNorm2d(out_ch, eps=0.001)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)), inplace=True)


class Inception(nn.Module):
    """Four parallel branches (1x1; 1x1-3x3; 1x1-3x3; pool-1x1) concatenated on channels."""

    def __init__(
        self, in_ch: int, ch1: int, ch3red: int, ch3: int, ch5red: int, ch5: int, pool_proj: int
    ) -> None:
        super().__init__()
        self.branch1 = BasicConv2d(in_ch, ch1, 1)
        self.branch2 = nn.Sequential(
            BasicConv2d(in_ch, ch3red, 1), BasicConv2d(ch3red, ch3, 3, padding=1)
        )
        # The paper's "5x5" branch is a 3x3 convolution in torchvision (a known bug kept there for
        # the pretrained weights); we keep it too so that the parameter count matches.
        self.branch3 = nn.Sequential(
            BasicConv2d(in_ch, ch5red, 1), BasicConv2d(ch5red, ch5, 3, padding=1)
        )
        self.branch4 = nn.Sequential(
            nn.MaxPool2d(3, stride=1, padding=1, ceil_mode=True), BasicConv2d(in_ch, pool_proj, 1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        branches = [self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)]
        return torch.cat(branches, 1)


class GoogLeNet(nn.Module):
    """torchvision's GoogLeNet without the auxiliary classifiers."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = BasicConv2d(3, 64, 7, stride=2, padding=3)
        self.maxpool1 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.conv2 = BasicConv2d(64, 64, 1)
        self.conv3 = BasicConv2d(64, 192, 3, padding=1)
        self.maxpool2 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.inception3a = Inception(192, 64, 96, 128, 16, 32, 32)
        self.inception3b = Inception(256, 128, 128, 192, 32, 96, 64)
        self.maxpool3 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.inception4a = Inception(480, 192, 96, 208, 16, 48, 64)
        self.inception4b = Inception(512, 160, 112, 224, 24, 64, 64)
        self.inception4c = Inception(512, 128, 128, 256, 24, 64, 64)
        self.inception4d = Inception(512, 112, 144, 288, 32, 64, 64)
        self.inception4e = Inception(528, 256, 160, 320, 32, 128, 128)
        self.maxpool4 = nn.MaxPool2d(2, stride=2, ceil_mode=True)
        self.inception5a = Inception(832, 256, 160, 320, 32, 128, 128)
        self.inception5b = Inception(832, 384, 192, 384, 48, 128, 128)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.dropout = nn.Dropout(0.2)
        self.fc = nn.Linear(1024, num_classes)
        _init_googlenet(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool1(self.conv1(x))
        x = self.maxpool2(self.conv3(self.conv2(x)))
        x = self.maxpool3(self.inception3b(self.inception3a(x)))
        x = self.inception4c(self.inception4b(self.inception4a(x)))
        x = self.maxpool4(self.inception4e(self.inception4d(x)))
        x = self.inception5b(self.inception5a(x))
        return self.fc(self.dropout(torch.flatten(self.avgpool(x), 1)))


def _init_googlenet(model: nn.Module) -> None:
    """torchvision's GoogLeNet initialization: truncated normal (std 0.01), BN weight 1 bias 0."""
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.trunc_normal_(m.weight, mean=0.0, std=0.01, a=-2, b=2)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.constant_(m.weight, 1)
            nn.init.constant_(m.bias, 0)


# --- registry --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSpec:
    """A built-in model: its registry name, a one-line description and how to build it."""

    name: str
    description: str
    factory: Callable[[int], nn.Module]
    input_shape: tuple[int, ...]
    num_classes: int
    param_count: int


def _spec(
    name: str,
    title: str,
    factory: Callable[[int], nn.Module],
    input_shape: tuple[int, ...],
    num_classes: int,
    param_count: int,
) -> ModelSpec:
    shape = "x".join(map(str, input_shape))
    description = f"{title}, {param_count / 1e6:.3g} M params, {shape} input, {num_classes} classes"
    return ModelSpec(name, description, factory, input_shape, num_classes, param_count)


MODELS: Mapping[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        _spec("mlp", "MLP 784-1024-1024-10 with ReLU", mlp, (1, 28, 28), 10, 1_863_690),
        _spec("cnn", "small CNN, 3 conv-ReLU-pool + 2 fc", SmallCNN, (3, 32, 32), 10, 620_362),
        _spec("resnet18", "ResNet-18 (He et al. 2016)", resnet18, (3, 224, 224), 1000, 11_689_512),
        _spec("resnet50", "ResNet-50 (He et al. 2016)", resnet50, (3, 224, 224), 1000, 25_557_032),
        _spec(
            "vgg11", "VGG-11 (Simonyan & Zisserman 2015)", vgg11, (3, 224, 224), 1000, 132_863_336
        ),
        _spec(
            "inception",
            "GoogLeNet/Inception v1 (Szegedy et al. 2015), no aux heads",
            GoogLeNet,
            (3, 224, 224),
            1000,
            6_624_904,
        ),
    )
}


def get_spec(name: str) -> ModelSpec:
    """The built-in model ``name``; ConfigError listing the available names if there is none."""
    try:
        return MODELS[name]
    except KeyError:
        raise ConfigError(f"unknown model {name!r}; available: {', '.join(MODELS)}") from None


def build_model(name: str, num_classes: int | None = None) -> nn.Module:
    """A fresh built-in model ``name`` with ``num_classes`` outputs (default: the model's own)."""
    spec = get_spec(name)
    if num_classes is None:
        num_classes = spec.num_classes
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
        raise ConfigError(f"num_classes: must be a positive integer, got {num_classes!r}")
    return spec.factory(num_classes)


# --- user models -----------------------------------------------------------------------------


def load_factory(path: str) -> Callable[[], nn.Module]:
    """Import ``package.module:factory`` and return ``factory``; calling it builds the model.

    ``factory`` may be an ``nn.Module`` subclass or a function; only its being callable is checked
    here (:func:`instantiate` checks what it returns).

    Raises
    ------
    ConfigError
        One line naming ``path`` and what is wrong: not of the form ``package.module:factory``,
        the module cannot be imported (with the import error), it has no such attribute, or the
        attribute is not callable.
    """
    module_name, attr = _split_path(path)
    module = _import(path, module_name)
    if not hasattr(module, attr):
        raise ConfigError(f"model path {path!r}: module {module_name!r} has no attribute {attr!r}")
    factory = getattr(module, attr)
    if not callable(factory):
        raise ConfigError(
            f"model path {path!r}: {attr!r} is not callable (its type is "
            f"{type(factory).__name__}); name an nn.Module subclass or a function returning a model"
        )
    return factory


def _split_path(path: str) -> tuple[str, str]:
    module_name, sep, attr = path.partition(":")
    parts = module_name.split(".")
    if not sep or not attr.isidentifier() or not all(p.isidentifier() for p in parts):
        raise ConfigError(
            f"model path {path!r}: expected package.module:factory, e.g. mymodels.nets:make_net"
        )
    return module_name, attr


def _import(path: str, module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except Exception as err:
        hint = "; is its directory on PYTHONPATH?" if isinstance(err, ModuleNotFoundError) else ""
        raise ConfigError(
            f"model path {path!r}: cannot import module {module_name!r}: "
            f"{type(err).__name__}: {err}{hint}"
        ) from err


def instantiate(factory: Callable[[], Any]) -> nn.Module:
    """Call ``factory`` and return its model, with its optional attributes checked.

    Raises
    ------
    ConfigError
        Naming the factory as ``package.module:factory`` if it raises, returns something other
        than a ``torch.nn.Module``, or returns a model whose ``input_shape`` is not a tuple of
        positive ints or whose ``num_classes`` is not a positive int.
    """
    path = _factory_path(factory)
    try:
        model = factory()
    except Exception as err:
        raise ConfigError(
            f"model path {path!r}: the factory raised {type(err).__name__}: {err}"
        ) from err
    if not isinstance(model, nn.Module):
        raise ConfigError(
            f"model path {path!r}: the factory returned an object of type "
            f"{type(model).__name__}, not a torch.nn.Module"
        )
    _check_model_attributes(path, model)
    return model


def _factory_path(factory: Callable[[], Any]) -> str:
    module = getattr(factory, "__module__", "?")
    return f"{module}:{getattr(factory, '__qualname__', type(factory).__name__)}"


def _check_model_attributes(path: str, model: nn.Module) -> None:
    shape = getattr(model, "input_shape", None)
    if shape is not None and not (
        isinstance(shape, tuple) and shape and all(_positive_int(d) for d in shape)
    ):
        raise ConfigError(
            f"model path {path!r}: the model's input_shape must be a tuple of positive ints "
            f"such as (3, 32, 32), got {shape!r}"
        )
    classes = getattr(model, "num_classes", None)
    if classes is not None and not _positive_int(classes):
        raise ConfigError(
            f"model path {path!r}: the model's num_classes must be a positive int, got {classes!r}"
        )


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
