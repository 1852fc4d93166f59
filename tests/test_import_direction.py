"""The measuring code is called by the command line, never the other way round: no module of
``profilers/`` imports ``simcore.cli`` (at the top or inside a function)."""

from __future__ import annotations

import ast
from pathlib import Path

PROFILERS = Path(__file__).resolve().parent.parent / "profilers"


def imported_modules(path: Path) -> set[str]:
    """Every module an ``import`` or ``from ... import`` anywhere in ``path`` names."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_profilers_never_import_the_command_line() -> None:
    files = sorted(PROFILERS.rglob("*.py"))
    assert len(files) > 20  # the scan sees the package
    offenders = {
        str(path.relative_to(PROFILERS.parent)): sorted(
            name for name in imported_modules(path) if name.split(".")[:2] == ["simcore", "cli"]
        )
        for path in files
    }
    assert {path: names for path, names in offenders.items() if names} == {}


def test_the_scan_finds_such_an_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from simcore.cli.network_cmd import run_measure\n")
    assert "simcore.cli.network_cmd" in imported_modules(bad)
