"""Edge module: write output files so that a reader sees the old file or the complete new one.

Everything sgdsim writes (traces, network profiles, exports, figures) goes through
:func:`atomic_output`, so an interrupted run never leaves half a file, and an existing file is only
replaced when the user asked for it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from simcore.errors import ConfigError


def refuse_existing(path: str | os.PathLike[str], overwrite: bool) -> Path:
    """``path`` as a Path; ConfigError if it exists and ``overwrite`` is false."""
    target = Path(path)
    if target.exists() and not overwrite:
        raise ConfigError(f"{target}: already exists; pass --force to overwrite it")
    return target


@contextmanager
def atomic_output(path: str | os.PathLike[str], *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path`` in one rename.

    The new file gets the permissions a plain ``open()`` would give it (0666 less the umask):
    temporary files are created private (0600), which would hide a user's results from others.
    On any error the temporary file is removed and ``path`` is left as it was.
    """
    target = refuse_existing(path, overwrite)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)  # the only portable way to read it is to set it
    os.umask(mask)
    return mask
