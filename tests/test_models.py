"""Built-in models (parameter counts, output shapes, fx tracing) and loading user factories."""

from __future__ import annotations

import operator
import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.fx
from torch import nn

from profilers import models
from profilers.models import MODELS, build_model, get_spec, instantiate, load_factory
from simcore.errors import ConfigError

# Closed forms for the small models (weights + biases per Linear/Conv2d) and torchvision's published
# counts for the image models with 1000 classes.
EXPECTED_PARAMS = {
    "mlp": (784 * 1024 + 1024) + (1024 * 1024 + 1024) + (1024 * 10 + 10),
    "cnn": (3 * 32 * 9 + 32)
    + (32 * 64 * 9 + 64)
    + (64 * 128 * 9 + 128)
    + (128 * 4 * 4 * 256 + 256)
    + (256 * 10 + 10),
    # stem, then per stage: two 3x3 convs with BN (and a 1x1 shortcut with BN where it widens)
    "resnet8": (3 * 16 * 9 + 2 * 16)
    + (2 * (16 * 16 * 9 + 2 * 16))
    + (16 * 32 * 9 + 32 * 32 * 9 + 2 * 2 * 32 + 16 * 32 + 2 * 32)
    + (32 * 64 * 9 + 64 * 64 * 9 + 2 * 2 * 64 + 32 * 64 + 2 * 64)
    + (64 * 10 + 10),
    # embedding and positions; per block two norms, q/k/v and output projections, feed-forward
    "transformer": (32 * 128 + 128)
    + 16 * 128
    + 2
    * (2 * 2 * 128 + (128 * 384 + 384) + (128 * 128 + 128) + (128 * 256 + 256) + (256 * 128 + 128))
    + 2 * 128
    + (128 * 10 + 10),
    "resnet18": 11_689_512,
    "resnet50": 25_557_032,
    "vgg11": 132_863_336,
    "inception": 6_624_904,
}


@pytest.fixture(scope="module", params=list(MODELS))
def built(request: pytest.FixtureRequest) -> tuple[models.ModelSpec, nn.Module]:
    """Each built-in model, built once per test module (vgg11 alone allocates ~530 MB)."""
    torch.manual_seed(0)
    spec = get_spec(request.param)
    return spec, build_model(spec.name).eval()


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_registry_order_and_names() -> None:
    assert list(MODELS) == [
        "mlp",
        "cnn",
        "resnet8",
        "transformer",
        "resnet18",
        "resnet50",
        "vgg11",
        "inception",
    ]
    assert all(spec.name == name for name, spec in MODELS.items())


def test_param_count_matches_spec_and_published(built: tuple[models.ModelSpec, nn.Module]) -> None:
    spec, model = built
    assert count_params(model) == spec.param_count == EXPECTED_PARAMS[spec.name]
    assert f"{spec.param_count / 1e6:.3g} M params" in spec.description


def test_forward_gives_one_logit_per_class(built: tuple[models.ModelSpec, nn.Module]) -> None:
    spec, model = built
    with torch.no_grad():
        out = model(torch.randn(2, *spec.input_shape))
    assert out.shape == (2, spec.num_classes)


def test_fx_traceable(built: tuple[models.ModelSpec, nn.Module]) -> None:
    graph = torch.fx.symbolic_trace(built[1]).graph
    assert sum(node.op == "call_module" for node in graph.nodes) > 3


@pytest.mark.parametrize("built", ["inception"], indirect=True)
def test_inception_branches_join_at_cat(built: tuple[models.ModelSpec, nn.Module]) -> None:
    graph = torch.fx.symbolic_trace(built[1]).graph
    cats = [n for n in graph.nodes if n.op == "call_function" and n.target is torch.cat]
    assert len(cats) == 9  # inception3a, 3b, 4a-4e, 5a, 5b
    for cat in cats:
        assert len(cat.args[0]) == 4
        assert len(cat.all_input_nodes) == 4
        # each input is a branch's last ReLU, applied to that branch's BatchNorm
        owners = {node.args[0].target.split(".")[1] for node in cat.all_input_nodes}
        assert owners == {"branch1", "branch2", "branch3", "branch4"}
    names = {name for name, _ in built[1].named_modules()}
    assert {"conv1.conv", "inception3a.branch1.conv", "inception5b.branch4.1.bn", "fc"} <= names


@pytest.mark.parametrize("built", ["resnet18"], indirect=True)
def test_resnet18_has_residual_adds(built: tuple[models.ModelSpec, nn.Module]) -> None:
    graph = torch.fx.symbolic_trace(built[1]).graph
    adds = [n for n in graph.nodes if n.op == "call_function" and n.target is operator.add]
    assert len(adds) == 8  # one per BasicBlock: 4 stages x 2 blocks
    assert all(len(add.all_input_nodes) == 2 for add in adds)
    names = {name for name, _ in built[1].named_modules()}
    assert {"conv1", "bn1", "layer1.0.conv1", "layer2.0.downsample.0", "fc"} <= names


@pytest.mark.parametrize("built", ["resnet8"], indirect=True)
def test_resnet8_has_a_residual_add_per_block(built: tuple[models.ModelSpec, nn.Module]) -> None:
    graph = torch.fx.symbolic_trace(built[1]).graph
    adds = [n for n in graph.nodes if n.op == "call_function" and n.target is operator.add]
    assert len(adds) == 3  # one BasicBlock in each of the three stages
    names = {name for name, _ in built[1].named_modules()}
    assert {"conv1", "layer2.0.downsample.0", "layer3.0.conv2", "fc"} <= names


@pytest.mark.parametrize("built", ["transformer"], indirect=True)
def test_transformer_joins_two_residuals_per_block(
    built: tuple[models.ModelSpec, nn.Module],
) -> None:
    graph = torch.fx.symbolic_trace(built[1]).graph
    adds = [n for n in graph.nodes if n.op == "call_function" and n.target is operator.add]
    assert len(adds) == 1 + 2 * 2  # the positions, then attention and feed-forward per block
    products = [n for n in graph.nodes if n.target is torch.matmul]
    assert len(products) == 2 * 2  # scores and mixing, per block
    out = built[1](torch.randn(3, *built[0].input_shape))
    assert out.shape == (3, built[0].num_classes)


@pytest.mark.parametrize("built", ["vgg11"], indirect=True)
def test_vgg11_submodule_names(built: tuple[models.ModelSpec, nn.Module]) -> None:
    names = {name for name, _ in built[1].named_modules()}
    assert {"features.0", "features.18", "avgpool", "classifier.0", "classifier.6"} <= names


# resnet18 runs at 3x32x32 to keep the test quick: its adaptive average pool accepts any size.
@pytest.mark.parametrize(
    ("name", "num_classes", "input_shape"),
    [("mlp", 3, (1, 28, 28)), ("cnn", 7, (3, 32, 32)), ("resnet18", 5, (3, 32, 32))],
)
def test_num_classes_override(name: str, num_classes: int, input_shape: tuple[int, ...]) -> None:
    model = build_model(name, num_classes=num_classes).eval()
    with torch.no_grad():
        out = model(torch.randn(2, *input_shape))
    assert out.shape == (2, num_classes)
    assert get_spec(name).num_classes != num_classes


@pytest.mark.parametrize("num_classes", [0, -1, True])
def test_bad_num_classes(num_classes: int) -> None:
    with pytest.raises(ConfigError, match="num_classes: must be a positive integer"):
        build_model("mlp", num_classes=num_classes)


def test_unknown_model_lists_available() -> None:
    with pytest.raises(ConfigError) as info:
        get_spec("alexnet")
    assert str(info.value) == (
        "unknown model 'alexnet'; available: mlp, cnn, resnet8, transformer, resnet18, resnet50, "
        "vgg11, inception"
    )
    with pytest.raises(ConfigError, match="unknown model 'alexnet'"):
        build_model("alexnet")


# --- user model factories ----------------------------------------------------------------------

USER_MODULE = "sgdsim_test_user_models"
USER_SOURCE = """
    from torch import nn

    not_callable = 42


    class Net(nn.Sequential):
        input_shape = (4,)
        num_classes = 3

        def __init__(self):
            super().__init__(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


    def make():
        return Net()


    def returns_int():
        return 7


    def raises():
        raise RuntimeError("out of coffee")


    def needs_argument(width):
        return nn.Linear(width, 2)


    class ListShape(nn.Linear):
        input_shape = [4]

        def __init__(self):
            super().__init__(4, 2)


    class ZeroShape(ListShape):
        input_shape = (4, 0)


    class FloatClasses(ListShape):
        input_shape = None
        num_classes = 2.5
"""


def write_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, source: str) -> None:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A temporary importable module of model factories; yields its name."""
    write_module(tmp_path, monkeypatch, USER_MODULE, USER_SOURCE)
    yield USER_MODULE
    sys.modules.pop(USER_MODULE, None)


@pytest.mark.parametrize("attr", ["make", "Net"])
def test_load_factory_function_or_class(user_module: str, attr: str) -> None:
    factory = load_factory(f"{user_module}:{attr}")
    assert factory is getattr(sys.modules[user_module], attr)
    model = instantiate(factory)
    assert type(model).__name__ == "Net"
    assert model(torch.randn(2, 4)).shape == (2, 3)
    assert (model.input_shape, model.num_classes) == ((4,), 3)


@pytest.mark.parametrize("path", ["nocolon", "a.b:c:d", ":make", "mod:", "mod.:make", "m:1x"])
def test_load_factory_bad_form(path: str) -> None:
    expected = f"model path {path!r}: expected package.module:factory"
    with pytest.raises(ConfigError, match=re.escape(expected)):
        load_factory(path)


def test_load_factory_missing_module() -> None:
    path = "sgdsim_no_such_module_xyz:make"
    expected = (
        f"model path {path!r}: cannot import module 'sgdsim_no_such_module_xyz': "
        "ModuleNotFoundError: No module named 'sgdsim_no_such_module_xyz'; "
        "is its directory on PYTHONPATH?"
    )
    with pytest.raises(ConfigError, match=re.escape(expected)):
        load_factory(path)


def test_load_factory_module_whose_import_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "sgdsim_test_broken_models"
    write_module(tmp_path, monkeypatch, name, "import sgdsim_missing_dependency_xyz\n")
    with pytest.raises(ConfigError) as info:
        load_factory(f"{name}:make")
    message = str(info.value)
    assert message.startswith(f"model path '{name}:make': cannot import module '{name}'")
    assert "No module named 'sgdsim_missing_dependency_xyz'" in message
    assert "\n" not in message


def test_load_factory_missing_attribute(user_module: str) -> None:
    expected = f"model path '{user_module}:nope': module '{user_module}' has no attribute 'nope'"
    with pytest.raises(ConfigError, match=re.escape(expected)):
        load_factory(f"{user_module}:nope")


def test_load_factory_not_callable(user_module: str) -> None:
    expected = (
        f"model path '{user_module}:not_callable': 'not_callable' is not callable (its type is int)"
    )
    with pytest.raises(ConfigError, match=re.escape(expected)):
        load_factory(f"{user_module}:not_callable")


@pytest.mark.parametrize(
    ("attr", "culprit"),
    [
        ("ListShape", "input_shape must be a tuple of positive ints such as (3, 32, 32), got [4]"),
        (
            "ZeroShape",
            "input_shape must be a tuple of positive ints such as (3, 32, 32), got (4, 0)",
        ),
        ("FloatClasses", "num_classes must be a positive int, got 2.5"),
    ],
)
def test_instantiate_checks_model_attributes(user_module: str, attr: str, culprit: str) -> None:
    path = f"{user_module}:{attr}"
    with pytest.raises(ConfigError) as info:
        instantiate(load_factory(path))
    assert str(info.value) == f"model path {path!r}: the model's {culprit}"


def test_instantiate_rejects_non_module(user_module: str) -> None:
    path = f"{user_module}:returns_int"
    factory = load_factory(path)  # callable is all load_factory checks
    expected = (
        f"model path {path!r}: the factory returned an object of type int, not a torch.nn.Module"
    )
    with pytest.raises(ConfigError, match=re.escape(expected)):
        instantiate(factory)


def test_instantiate_wraps_factory_errors(user_module: str) -> None:
    path = f"{user_module}:raises"
    expected = f"model path {path!r}: the factory raised RuntimeError: out of coffee"
    with pytest.raises(ConfigError, match=re.escape(expected)) as info:
        instantiate(load_factory(path))
    assert isinstance(info.value.__cause__, RuntimeError)


def test_instantiate_names_factory_needing_arguments(user_module: str) -> None:
    path = f"{user_module}:needs_argument"
    with pytest.raises(ConfigError, match=re.escape(f"model path {path!r}: the factory raised ")):
        instantiate(load_factory(path))


def test_instantiate_plain_callable_is_named_by_qualname() -> None:
    def no_model() -> object:
        return "not a model"

    with pytest.raises(
        ConfigError, match=r"test_models:.*no_model'.*returned an object of type str"
    ):
        instantiate(no_model)
    assert isinstance(instantiate(lambda: nn.Linear(2, 2)), nn.Linear)
