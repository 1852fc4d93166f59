"""Built-in models to profile, their registry, and loading a user's model factory.

torchvision cannot be a dependency, so the image models are defined in :mod:`profilers.zoo`,
layer for layer as in torchvision (same submodule names, such as ``layer1.0.conv1``,
``features.0`` or ``inception3a.branch1.conv``, and the same initialization), so that their
parameter counts match the published architectures exactly with the default 1000 classes:

==============  =============================================  ============  ==============
name            architecture                                   parameters    input
==============  =============================================  ============  ==============
``mlp``         784-1024-1024-10 perceptron with ReLU          1,863,690     1x28x28, 10
``cnn``         three conv-ReLU-maxpool stages and two fc      620,362       3x32x32, 10
``resnet8``     CIFAR ResNet-8 (He et al. 2016, section 4.2)   78,042        3x32x32, 10
``transformer`` 2-block pre-norm transformer encoder, width    272,778       16x32, 10
                128, 4 heads (Vaswani et al. 2017)
``resnet18``    ResNet-18 (He et al. 2016), torchvision v1.5   11,689,512    3x224x224
``resnet50``    ResNet-50 (He et al. 2016), torchvision v1.5   25,557,032    3x224x224
``vgg11``       VGG-11, configuration "A" without batch norm   132,863,336   3x224x224
``inception``   GoogLeNet / Inception v1 without aux heads     6,624,904     3x224x224
==============  =============================================  ============  ==============

``mlp`` takes MNIST-like 1x28x28 images and ``cnn`` CIFAR-10-like 3x32x32 images, both with 10
classes; ``transformer`` 16 tokens of 32 features (a sequence already embedded as vectors, so
that inputs stay float tensors) with 10 classes; the others take ImageNet-like 3x224x224 images
with 1000 classes. Inputs are given
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from torch import nn

from profilers.zoo import (
    GoogLeNet,
    SmallCNN,
    mlp,
    resnet8,
    resnet18,
    resnet50,
    transformer,
    vgg11,
)
from simcore.errors import ConfigError

__all__ = [
    "MODELS",
    "ModelSpec",
    "build_model",
    "get_spec",
    "instantiate",
    "load_factory",
]


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
        _spec(
            "resnet8",
            "CIFAR ResNet-8 (He et al. 2016, 6n+2, n=1)",
            resnet8,
            (3, 32, 32),
            10,
            78_042,
        ),
        _spec(
            "transformer",
            "transformer encoder, 2 blocks of width 128, 4 heads",
            transformer,
            (16, 32),
            10,
            272_778,
        ),
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
