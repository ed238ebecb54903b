"""A pack: the objects one save of a shell adds, as one blob, kept in one sealed row.

Each object is its id and its data. A bashkit id (64 lowercase hex digits, a SHA-256) is kept as
its 32 bytes, half its text: the pack is most of the WAL a call writes. Any other id is kept as
its UTF-8 text, so the format takes whatever id it is given.

    object := varint(0) id[32] varint(len) data       (a 64-digit hex id)
            | varint(n) utf8[n] varint(len) data      (any other id, n > 0)

`LEGACY` reads the format of the packs kept before (`shell_objects` rows `pack:N`): for each
object a 2-byte id length, a 4-byte data length, the id's text and the data.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

_RAW = 32


class Malformed(ValueError):
    """Bytes that are not a pack."""


def packed(objects: Mapping[str, bytes]) -> bytes:
    """The objects as one blob, in this module's format."""
    parts: list[bytes] = []
    for oid, data in objects.items():
        parts += [_id(oid), _varint(len(data)), data]
    return b"".join(parts)


def unpacked(blob: bytes) -> dict[str, bytes]:
    """The objects of a blob `packed` made.

    Raises:
        Malformed: it is not one.
    """
    found: dict[str, bytes] = {}
    at = 0
    while at < len(blob):
        n, at = _read_varint(blob, at)
        if n == 0:
            raw, at = _take(blob, at, _RAW)
            oid = raw.hex()
        else:
            name, at = _take(blob, at, n)
            try:
                oid = name.decode()
            except UnicodeDecodeError:
                raise Malformed("an id is not UTF-8") from None
        size, at = _read_varint(blob, at)
        found[oid], at = _take(blob, at, size)
    return found


def legacy_unpacked(blob: bytes) -> dict[str, bytes]:
    """The objects of a pack kept by the version before this format.

    Raises:
        Malformed: it is not one.
    """
    found: dict[str, bytes] = {}
    at = 0
    try:
        while at < len(blob):
            n, size = struct.unpack_from(">HI", blob, at)
            name, at = _take(blob, at + 6, n)
            found[name.decode()], at = _take(blob, at, size)
    except (struct.error, UnicodeDecodeError):
        raise Malformed("not a pack") from None
    return found


def _id(oid: str) -> bytes:
    if len(oid) == 2 * _RAW:
        try:
            raw = bytes.fromhex(oid)
        except ValueError:
            raw = b""
        if raw.hex() == oid:  # lowercase hex: it reads back the same
            return b"\x00" + raw
    name = oid.encode()
    return _varint(len(name)) + name


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_varint(blob: bytes, at: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if at >= len(blob) or shift > 35:
            raise Malformed("a length is cut or too long")
        byte = blob[at]
        at += 1
        n |= (byte & 0x7F) << shift
        if byte < 0x80:
            return n, at
        shift += 7


def _take(blob: bytes, at: int, n: int) -> tuple[bytes, int]:
    if at + n > len(blob):
        raise Malformed("cut short")
    return blob[at : at + n], at + n
