"""``sgdsim --version``: the version of sgdsim and of every file format it reads and writes.

The format versions come from the modules that check them (their ``SUPPORTED_SCHEMA_VERSIONS``),
so this text cannot drift from what the loaders accept.
"""

from __future__ import annotations

import argparse
from typing import Any

from simcore import __version__
from simcore.network import SUPPORTED_SCHEMA_VERSIONS as NETWORK_VERSIONS
from simcore.report.output import SCHEMA_NAME as OUTPUT_SCHEMA_NAME
from simcore.report.output import SUPPORTED_SCHEMA_VERSIONS as OUTPUT_VERSIONS
from simcore.trace.model import SUPPORTED_SCHEMA_VERSIONS as TRACE_VERSIONS


def _versions(versions: tuple[int, ...]) -> str:
    return ", ".join(f"v{v}" for v in versions)


def version_text() -> str:
    """``sgdsim X.Y.Z`` and one line per format: the schema versions read (and written)."""
    return "\n".join(
        [
            f"sgdsim {__version__}",
            f"trace format (sgdsim.trace): reads {_versions(TRACE_VERSIONS)}",
            f"network profile (sgdsim.network): reads {_versions(NETWORK_VERSIONS)}",
            f"--json output ({OUTPUT_SCHEMA_NAME}): writes {_versions(OUTPUT_VERSIONS)}",
        ]
    )


class VersionAction(argparse.Action):
    """``--version``: print :func:`version_text` as it is (argparse's own action reflows lines)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(version_text())
        parser.exit()
