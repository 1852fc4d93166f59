"""Edge module: read input files and write output files safely.

Reading (:func:`read_json_file`): every file sgdsim reads (traces, network profiles, topologies,
placements, validation measurements) goes through one function that refuses, with one line naming
the file, what is not a file, what is too big (:data:`MAX_INPUT_BYTES`), what is not UTF-8 text,
not JSON, or JSON nested too deeply. A gzip-compressed file is read whatever its name.

Writing: :func:`check_output` checks an output option before any long work starts (the folder
exists and is writable, the extension names a format sgdsim writes, an existing file is only
replaced with ``--force``); :func:`atomic_output` then writes so that a reader sees the old file
or the complete new one, and an interrupted run never leaves half a file.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from simcore.errors import ConfigError, SgdsimError

MAX_INPUT_BYTES = 256 * 2**20  # 256 MiB of text (after decompression): far above any real trace
GZIP_MAGIC = b"\x1f\x8b"
JSON_SUFFIXES = (".json", ".json.gz")  # .gz: written gzip-compressed
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")  # written in the format the extension names


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.0f} MiB"


class _Unreadable(Exception):
    """What is wrong with an input file; the public readers add the file's name."""


def read_json_file(
    path: str | os.PathLike[str], *, error: type[SgdsimError] = ConfigError, what: str = ""
) -> Any:
    """Decode the JSON file ``path`` (UTF-8, gzip-compressed or not, at most
    :data:`MAX_INPUT_BYTES`).

    ``NaN`` and ``Infinity``, which Python's json accepts but JSON does not, are decoded: the
    validators of each format refuse them naming the field, which says more.

    Raises
    ------
    error
        One line ``PATH: problem``, or ``PATH: cannot read WHAT: problem`` with ``what``: no such
        file, a directory, unreadable, too big, a broken gzip stream, not UTF-8 text, not JSON,
        or JSON nested too deeply.
    """
    try:
        return _decode_json(_text(_content(Path(path))))
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except (_Unreadable, OSError) as err:
        problem = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise error(f"{path}: {f'cannot read {what}: ' if what else ''}{problem}") from None


def _content(path: Path) -> bytes:
    """The bytes of ``path``, gunzipped if they are gzip-compressed (whatever its name)."""
    limit = MAX_INPUT_BYTES  # read at each call, so that a test can lower it
    if stat.S_ISDIR(path.stat().st_mode):
        raise _Unreadable("is a directory, not a file")
    with path.open("rb") as handle:
        raw = handle.read(limit + 1)  # not more: /dev/zero is a file too
    if len(raw) > limit:
        raise _Unreadable(f"too big; sgdsim reads files up to {_mib(limit)}")
    return _gunzip(raw, limit) if raw[:2] == GZIP_MAGIC else raw


def _gunzip(raw: bytes, limit: int) -> bytes:
    """Decompress at most ``limit`` bytes: a small file cannot expand into gigabytes."""
    decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        data = decompressor.decompress(raw, limit + 1)
    except zlib.error as err:
        raise _Unreadable(f"not a valid gzip file ({err})") from None
    if len(data) > limit:
        raise _Unreadable(f"too big uncompressed; sgdsim reads files up to {_mib(limit)}")
    if not decompressor.eof:
        raise _Unreadable("a truncated gzip file")
    return data


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8-sig")  # -sig: a byte-order mark some editors write is no error
    except UnicodeDecodeError as err:
        raise _Unreadable(
            f"not a text file (byte {err.start} is not UTF-8); expected UTF-8 JSON"
        ) from None


def _decode_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        # A file cut off (a job killed while writing it, a partial copy) is the usual cause.
        cut = text.rstrip()[-1:] not in ("}", "]")
        raise _Unreadable(
            f"not valid JSON (line {err.lineno}, column {err.colno}): {err.msg}"
            + ("; the file ends early (truncated?)" if cut and text.strip() else "")
        ) from None
    except RecursionError:
        raise _Unreadable("JSON nested too deeply for sgdsim to read") from None
    except ValueError as err:  # an integer of thousands of digits
        raise _Unreadable(f"not valid JSON: {err}") from None


def check_output(
    path: str,
    option: str,
    *,
    force: bool,
    suffixes: Sequence[str] = JSON_SUFFIXES,
) -> Path:
    """Check that ``path``, given with ``option``, can be written, before any work starts.

    The rule for every output option of the CLI: the extension is one of ``suffixes``; the folder
    must exist (as for ``cp`` or ``tee``; sgdsim creates no folders for single files) and be
    writable; an existing file is replaced only with ``force``, and never a directory or a device.

    Raises
    ------
    ConfigError
        ``OPTION: PATH: what is wrong`` (and what is expected).
    """
    if not path:
        raise ConfigError(f"{option}: an empty path; give a file name")
    target = Path(path)
    try:
        return _check_output(target, path, option, force, suffixes)
    except OSError as err:  # a name too long for the file system, a loop of links
        raise ConfigError(f"{option}: {path}: {err.strerror or err}") from None


def _check_output(
    target: Path, path: str, option: str, force: bool, suffixes: Sequence[str]
) -> Path:
    if target.is_dir():
        raise ConfigError(f"{option}: {path}: is a directory; give a file name")
    if not target.name.lower().endswith(tuple(suffixes)):
        raise ConfigError(
            f"{option}: {path}: {_extension(target.name)}; expected a file name ending in "
            + (suffixes[0] if len(suffixes) == 1 else f"one of {', '.join(suffixes)}")
        )
    if target.exists() or target.is_symlink():
        if not force:
            raise ConfigError(f"{option}: {path}: already exists; pass --force to overwrite it")
        if not target.is_file():
            raise ConfigError(f"{option}: {path}: exists and is not a regular file")
    folder = target.parent
    if not folder.exists():
        raise ConfigError(f"{option}: {path}: folder {folder} does not exist; create it first")
    if not folder.is_dir():
        raise ConfigError(f"{option}: {path}: {folder} is not a folder")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise ConfigError(
            f"{option}: {path}: cannot write in {folder}: {err.strerror or err}"
        ) from None
    return target


def _extension(name: str) -> str:
    suffix = Path(name).suffix
    return f"unknown extension {suffix!r}" if suffix else "no extension"


def refuse_existing(path: str | os.PathLike[str], overwrite: bool) -> Path:
    """``path`` as a Path; ConfigError if it exists and ``overwrite`` is false."""
    target = Path(path)
    if target.exists() and not overwrite:
        raise ConfigError(f"{target}: already exists; pass --force to overwrite it")
    return target


def check_rank_folder(
    folder: Path,
    names: Sequence[str],
    *,
    overwrite: bool,
    is_rank_file: Callable[[str], bool],
    stranger: str,
) -> list[Path]:
    """The files ``names`` in ``folder`` (one per rank of an export), checked before any is
    written: ``folder`` is no file, no target exists unless ``overwrite``, and no other file
    of the folder is one its reader would take as a rank (``is_rank_file``; ``stranger`` says
    what to do about it): tools such as HTA and ASTRA-sim read every rank file they find."""
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{folder}: is not a folder; give a folder for the rank traces")
    targets = [folder / name for name in names]
    for target in targets:
        refuse_existing(target, overwrite)
    if folder.is_dir():
        ours = set(names)
        for path in sorted(folder.iterdir()):
            if is_rank_file(path.name) and path.name not in ours:
                raise ConfigError(f"{path}: {stranger}")
    return targets


@contextmanager
def atomic_output(path: str | os.PathLike[str], *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path`` in one rename.

    Missing folders are created (library callers and scenario output folders rely on it; the CLI
    checks single output files with :func:`check_output` first). The new file gets the
    permissions a plain ``open()`` would give it (0666 less the umask): temporary files are
    created private (0600), which would hide a user's results from others. On any error the
    temporary file is removed and ``path`` is left as it was.
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
