"""``sgdsim simulate --hta-dir / --chakra-dir``: what the command line writes, and refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simcore.cli.main import main

FAST = ["--steps", "12", "--warmup", "2", "--bandwidth", "1Gbit/s"]


def one_line_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    out, err = capsys.readouterr()
    assert code != 0 and "Traceback" not in out + err, err
    assert err.startswith("sgdsim: error: ") and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("arch", ["ps", "allreduce", "ddp"])
def test_hta_dir_holds_one_rank_per_worker_of_the_steps_after_the_warmup(
    arch: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "hta"
    argv = ["simulate", "cnn-b32", "--workers", "3", "--arch", arch, *FAST]
    assert main([*argv, "--hta-dir", str(folder), "--export-steps", "4"]) == 0
    assert "wrote 3 HTA rank traces of steps 2..5" in capsys.readouterr().err
    files = sorted(p.name for p in folder.iterdir())
    assert files == ["rank-0.json", "rank-1.json", "rank-2.json"]
    for rank, name in enumerate(files):
        doc = json.loads((folder / name).read_text())
        assert doc["distributedInfo"]["rank"] == rank and doc["distributedInfo"]["world_size"] == 3
        steps = sorted(
            e["name"] for e in doc["traceEvents"] if e["name"].startswith("ProfilerStep")
        )
        assert steps == [f"ProfilerStep#{s}" for s in range(2, 6)]
    # a second export into the same folder needs --force; with it, the files are replaced
    assert "already exists" in one_line_error([*argv, "--hta-dir", str(folder)], capsys)
    assert main([*argv, "--hta-dir", str(folder), "--force"]) == 0


def test_export_options_are_checked_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["simulate", "cnn-b32", *FAST]
    a_file = tmp_path / "afile"
    a_file.write_text("mine")
    cases = [
        (["--workers", "2,4", "--hta-dir", str(tmp_path / "h")], "--hta-dir: needs a single"),
        (["--workers", "2", "--hta-dir", str(a_file)], "is not a folder"),
        (["--workers", "2", "--hta-dir", str(tmp_path / "no" / "h")], "does not exist"),
        (["--workers", "2", "--export-steps", "3"], "--export-steps: only with --hta-dir"),
        (["--workers", "2", "--hta-dir", str(tmp_path / "h"), "--export-steps", "0"], ">= 1"),
        (["--workers", "2", "--chakra-dir", str(a_file)], "is not a folder"),
    ]
    for extra, words in cases:
        assert words in one_line_error([*base, *extra], capsys), extra
    assert a_file.read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # nothing else was written


def test_hta_dir_refuses_a_folder_with_other_traces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "hta"
    folder.mkdir()
    (folder / "rank-7.json").write_text("{}")  # HTA would read it as one more rank
    err = one_line_error(
        ["simulate", "cnn-b32", "--workers", "2", *FAST, "--hta-dir", str(folder), "--force"],
        capsys,
    )
    assert "rank-7.json" in err
    assert sorted(p.name for p in folder.iterdir()) == ["rank-7.json"]


def test_chakra_dir_writes_one_execution_trace_per_rank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("google.protobuf")
    from simcore.export.chakra_files import read_chakra_file

    folder = tmp_path / "chakra"
    argv = ["simulate", "cnn-b32", "--workers", "2", "--arch", "ddp", *FAST]
    assert main([*argv, "--chakra-dir", str(folder)]) == 0
    assert "wrote 2 Chakra execution traces of step 2" in capsys.readouterr().err
    files = sorted(folder.iterdir())
    assert len(files) == 2
    for path in files:
        metadata, nodes = read_chakra_file(path)
        assert metadata.version and nodes
    assert "already exists" in one_line_error([*argv, "--chakra-dir", str(folder)], capsys)
