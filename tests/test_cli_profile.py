"""``sgdsim profile``: writes a loadable trace, never clobbers a file, and fails in one line."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from profilers.models import MODELS
from simcore.cli.main import main
from simcore.trace.io import load_trace

from output_support import output

TINY = ["--batch-size", "2", "--steps", "2", "--warmup", "0", "--quiet"]


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "simcore.cli.main", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
    )


def test_profile_writes_a_trace_and_refuses_to_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "traces" / "cnn-b2.json"
    assert main(["profile", "--model", "cnn", *TINY, "--out", str(out)]) == 1
    assert f"folder {out.parent} does not exist" in capsys.readouterr().err  # as cp would say
    out.parent.mkdir()
    assert main(["profile", "--model", "cnn", *TINY, "--out", str(out)]) == 0
    assert f"wrote {out}: 14 layers, 45 ops/step, 2 steps" in capsys.readouterr().out
    trace = load_trace(out)
    assert trace.metadata.model_name == "cnn" and trace.metadata.batch_size == 2
    before = out.read_bytes()
    assert main(["profile", "--model", "cnn", *TINY, "--out", str(out)]) == 1
    assert "already exists; pass --force" in capsys.readouterr().err
    assert out.read_bytes() == before
    assert main(["profile", "--model", "cnn", *TINY, "--out", str(out), "--force"]) == 0
    assert [p.name for p in out.parent.iterdir()] == ["cnn-b2.json"]  # no temporary files left
    capsys.readouterr()
    assert main(["profile", "--model", "cnn", *TINY, "--out", str(out), "--force", "--json"]) == 0
    doc = output(capsys.readouterr().out)  # the sgdsim-output document, per the schema
    assert doc["command"] == "profile" and doc["context"]["written"] == str(out)
    assert [p["layer"] for p in doc["points"]] == [layer.name for layer in load_trace(out).layers]


@pytest.mark.parametrize("option", ["--model-path", "--model"])
def test_profile_a_user_model_by_import_path(tmp_path: Path, option: str) -> None:
    """--model takes a factory's import path as `sgdsim validate --model` does."""
    (tmp_path / "usernets.py").write_text(
        textwrap.dedent(
            """
            import torch
            from torch import nn

            class Tiny(nn.Module):
                input_shape = (6,)

                def __init__(self):
                    super().__init__()
                    self.a = nn.Linear(6, 8)
                    self.b = nn.Linear(8, 3)

                def forward(self, x):
                    return self.b(torch.relu(self.a(x)))
            """
        )
    )
    out = tmp_path / "tiny.json"
    result = run_cli("profile", option, "usernets:Tiny", *TINY, "--out", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    trace = load_trace(out)
    assert trace.metadata.model_name == "Tiny"
    assert [layer.name for layer in trace.layers] == ["a", "relu", "b", "loss"]
    assert trace.param_nbytes == 4 * (6 * 8 + 8 + 8 * 3 + 3)


def test_list_models(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "--list-models"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert names == list(MODELS)  # the registry's order (test_models pins it)


@pytest.mark.parametrize(
    "given",
    [
        ["--batch-size", "8"],
        ["--steps", "3"],
        ["--warmup", "1"],
        ["--device", "cpu"],  # even the default, when given: it would do nothing here
        ["--seed", "2"],
        ["--input-shape", "3x32x32"],
        ["--num-classes", "4"],
        ["-o", "x.json"],
        ["--force"],
        ["--json"],
    ],
)
def test_list_models_refuses_what_only_a_profile_uses(
    given: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [str(tmp_path / a) if a.endswith(".json") else a for a in given]
    assert main(["profile", "--list-models", *argv]) == 1
    option = {"-o": "--out"}.get(given[0], given[0])
    captured = capsys.readouterr()
    assert captured.out == "" and not list(tmp_path.iterdir())
    assert captured.err == (
        f"sgdsim: error: {option}: not with --list-models (it lists the built-in models and "
        "profiles nothing)\n"
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--model", "alexnet", "--out", "OUT"), "unknown model 'alexnet'; available: mlp, cnn"),
        (("--model", "cnn"), "--out: required"),
        (("--model", "cnn", "--out", "OUT", "--steps", "0"), "--steps: must be an integer >= 1"),
        (("--model", "cnn", "--out", "OUT", "--device", "cuda"), "--device: 'cuda' requested"),
        (("--model", "cnn", "--out", "OUT", "--input-shape", "3xa"), "--input-shape: '3xa' is not"),
        (("--model-path", "nodots", "--out", "OUT"), "expected package.module:factory"),
        (("--model-path", "no_such_module_x:f", "--out", "OUT"), "no_such_module_x"),
        (("--model", "no_such_module_x:f", "--out", "OUT"), "no_such_module_x"),
        (("--model", "mlp", "--out", "OUT", "--input-shape", "2x2"), "a training step failed"),
    ],
)
def test_errors_are_one_line_and_write_nothing(
    args: tuple[str, ...], expected: str, tmp_path: Path
) -> None:
    out = tmp_path / "out.json"
    argv = [a.replace("OUT", str(out)) for a in args]
    if "cuda" in argv:
        pytest.importorskip("torch")
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has a GPU")
    result = run_cli("profile", *argv, "--quiet")
    assert result.returncode == 1
    assert result.stderr.startswith("sgdsim: error: ")
    assert expected in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--bogus",), "the following arguments are required: COMMAND (see sgdsim --help)"),
        (("profile", "--model", "cnn", "--bogus"), "unrecognized arguments: --bogus"),
        (("profile", "--model", "cnn", "--steps", "x"), "argument --steps: invalid int value"),
        (("profile", "--model", "cnn", "--model-path", "a:b"), "not allowed with argument"),
        (("trace", "show"), "the following arguments are required: trace"),
        (("nosuchcommand",), "argument COMMAND: invalid choice: 'nosuchcommand'"),
    ],
)
def test_usage_mistakes_are_one_line(args: tuple[str, ...], expected: str) -> None:
    result = run_cli(*args)
    assert result.returncode == 2
    assert result.stderr.startswith("sgdsim: error: ") and expected in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "usage:" not in result.stderr


def test_a_bare_sgdsim_lists_its_commands() -> None:
    result = run_cli()
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.startswith("usage: sgdsim")
    for command in ("profile", "simulate", "timeline", "analyze", "advise", "validate"):
        assert f"\n    {command} " in result.stdout


def test_profile_with_threads_records_them_and_leaves_torchs_as_they_were(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    before = torch.get_num_threads()
    out = tmp_path / "cnn-t1.json"
    assert main(["profile", "--model", "cnn", *TINY, "--threads", "1", "--out", str(out)]) == 0
    assert capsys.readouterr().out.rstrip().endswith("per step; 1 torch thread(s)")
    assert load_trace(out).metadata.host["torch_threads"] == 1
    assert torch.get_num_threads() == before


@pytest.mark.parametrize(
    ("threads", "expected"),
    [
        ("0", "--threads: must be an integer >= 1, got 0"),
        ("-2", "--threads: must be an integer >= 1, got -2"),
        ("5000", "--threads: 5000 is more than the 1024 threads sgdsim profiles with"),
    ],
)
def test_threads_are_checked_before_profiling(
    threads: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "x.json"
    assert main(["profile", "--model", "cnn", *TINY, "--threads", threads, "--out", str(out)]) == 1
    assert capsys.readouterr().err == f"sgdsim: error: {expected}\n"
    assert not out.exists()


def test_threads_are_refused_with_list_models(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "--list-models", "--threads", "1"]) == 1
    assert capsys.readouterr().err.startswith("sgdsim: error: --threads: not with --list-models")


def test_profile_model_checks_its_threads() -> None:
    from profilers import profile_model
    from simcore.errors import ConfigError

    with pytest.raises(ConfigError, match=r"--threads: must be an integer >= 1, got 0"):
        profile_model("cnn", threads=0)
