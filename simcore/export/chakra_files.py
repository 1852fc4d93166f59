"""Chakra execution trace files: writing the ranks :func:`simcore.export.chakra.chakra_ranks`
builds as ``<prefix>.<rank>.et`` and reading them back, encoded as Chakra's ``protolib`` does
(each message prefixed with its length as a varint, the ``GlobalMetadata`` first).
"""

from __future__ import annotations

import gzip
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simcore.errors import ConfigError
from simcore.export.chakra import FILE_SUFFIX, ChakraRank, schema
from simcore.files import GZIP_MAGIC, atomic_output, check_rank_folder


def write_chakra_dir(
    directory: str | os.PathLike[str],
    ranks: Sequence[ChakraRank],
    *,
    prefix: str = "sgdsim",
    overwrite: bool = False,
) -> list[Path]:
    """Write ``ranks`` as ``<prefix>.<rank>.et`` into ``directory`` (created if missing).

    Every target is checked before any is written, and each is written atomically. ASTRA-sim
    is then given ``<directory>/<prefix>`` as its workload.

    Returns
    -------
    The paths written, in rank order.

    Raises
    ------
    ConfigError
        One line naming the path: the folder is a file, the prefix is no plain name, a target
        exists and ``overwrite`` is false, or the folder holds another rank of ``prefix`` (of an
        earlier export with more ranks), which ASTRA-sim would read along.
    """
    targets = check_chakra_dir(
        directory, [r.rank for r in ranks], prefix=prefix, overwrite=overwrite
    )
    for target, rank in zip(targets, ranks, strict=True):
        with atomic_output(target, overwrite=overwrite) as tmp, tmp.open("wb") as handle:
            handle.write(encode_messages([rank.metadata, *rank.nodes]))
    return targets


def check_chakra_dir(
    directory: str | os.PathLike[str],
    ranks: Sequence[int],
    *,
    prefix: str = "sgdsim",
    overwrite: bool = False,
) -> list[Path]:
    """The files :func:`write_chakra_dir` would write for ``ranks``, checked (before a run:
    the ranks are the workers and then the servers). Raises as it does."""
    if not prefix or Path(prefix).name != prefix:
        raise ConfigError(f"prefix: {prefix!r} is no file name; give a name such as 'sgdsim'")
    pattern = re.compile(re.escape(prefix) + r"\.\d+" + re.escape(FILE_SUFFIX))
    return check_rank_folder(
        Path(directory),
        [f"{prefix}.{rank}{FILE_SUFFIX}" for rank in ranks],
        overwrite=overwrite,
        is_rank_file=lambda name: pattern.fullmatch(name) is not None,
        stranger=f"a rank this export does not write ({len(ranks)} ranks); remove it or "
        "choose another prefix",
    )


def encode_messages(messages: Sequence[Any]) -> bytes:
    """Messages, each prefixed with its length as a varint (Chakra's ``encodeMessage``)."""
    out = bytearray()
    for message in messages:
        data = message.SerializeToString()
        out += _varint(len(data))
        out += data
    return bytes(out)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(0x80 | (value & 0x7F))
        value >>= 7
    out.append(value)
    return bytes(out)


def read_chakra_file(path: str | os.PathLike[str]) -> tuple[Any, list[Any]]:
    """The ``GlobalMetadata`` and ``Node`` messages of a Chakra ``.et`` file (gzipped or not).

    Raises
    ------
    ConfigError
        The file cannot be read, ends inside a message, or a message is not Chakra's.
    """
    pb = schema()
    try:
        raw = Path(path).read_bytes()
        if raw.startswith(GZIP_MAGIC):
            raw = gzip.decompress(raw)
    except (OSError, EOFError) as err:
        raise ConfigError(f"{path}: cannot read: {err}") from None
    chunks = _split(raw, path)
    if not chunks:
        raise ConfigError(f"{path}: empty; a Chakra trace starts with its GlobalMetadata")
    try:
        metadata = pb.GlobalMetadata.FromString(chunks[0])
        nodes = [pb.Node.FromString(chunk) for chunk in chunks[1:]]
    except Exception as err:  # protobuf's DecodeError
        raise ConfigError(f"{path}: not a Chakra execution trace ({err})") from None
    return metadata, nodes


def _split(raw: bytes, path: str | os.PathLike[str]) -> list[bytes]:
    chunks, pos = [], 0
    while pos < len(raw):
        size, shift = 0, 0
        while True:
            if pos >= len(raw) or shift > 63:
                raise ConfigError(f"{path}: ends inside a length prefix at byte {pos}")
            byte = raw[pos]
            pos += 1
            size |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if pos + size > len(raw):
            raise ConfigError(f"{path}: a message at byte {pos} runs past the end (truncated?)")
        chunks.append(raw[pos : pos + size])
        pos += size
    return chunks
