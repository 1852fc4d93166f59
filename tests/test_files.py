"""Atomic output: old file or complete new file, normal permissions, nothing replaced unasked."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from simcore.errors import ConfigError
from simcore.files import atomic_output
from simcore.trace.io import write_json_atomic


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_written_file_has_the_permissions_of_a_plain_open(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        path = write_json_atomic(tmp_path / "sub" / "a.json", {"x": 1})
    finally:
        os.umask(old)
    assert path.read_text() == '{"x":1}\n'
    assert mode(path) == 0o644  # not the 0600 of a temporary file


def test_failure_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_output(target, overwrite=True) as tmp:
        tmp.write_text("half")
        raise RuntimeError("interrupted")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_existing_file_is_kept_unless_asked(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    target.write_text("mine")
    with pytest.raises(ConfigError, match=r"a.json: already exists; pass --force"):
        write_json_atomic(target, {})
    assert target.read_text() == "mine"
    write_json_atomic(target, [], overwrite=True)
    assert target.read_text() == "[]\n"
