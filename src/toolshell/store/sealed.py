"""Secrets kept in the store, sealed with the state key ring (AES-256-GCM).

A ring key (`store.keys`) is never used as it is: each purpose gets its own key, derived with
HKDF-SHA256 (`info` names the purpose), so the key that signs shell snapshots never also
encrypts OAuth tokens. The first key of the ring seals; every key opens, so a ring rotated (a new
key put first) still opens what the old key sealed, and the next write seals it with the new one.
The record's place (`context`, e.g. the row's key) is authenticated with it: a sealed record copied
into another row does not open there.

Sealed form: one version byte, a 12-byte random nonce, the ciphertext with its 16-byte tag.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

_VERSION = b"\x01"
_NONCE = 12


def _derive(ring_key: bytes, purpose: str) -> AESGCM:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=f"toolshell {purpose}".encode())
    return AESGCM(key.derive(ring_key))


def seal(ring: Sequence[bytes], purpose: str, context: str, plaintext: bytes) -> bytes:
    """`plaintext` sealed with the ring's first key, for `purpose`, bound to `context`."""
    nonce = secrets.token_bytes(_NONCE)
    return _VERSION + nonce + _derive(ring[0], purpose).encrypt(nonce, plaintext, context.encode())


def unseal(ring: Sequence[bytes], purpose: str, context: str, sealed: bytes) -> bytes | None:
    """The plaintext, or None when no key of the ring opens it (or it is not a sealed record)."""
    if len(sealed) < 1 + _NONCE + 16 or sealed[:1] != _VERSION:
        return None
    nonce, body = sealed[1 : 1 + _NONCE], sealed[1 + _NONCE :]
    for key in ring:
        try:
            return _derive(key, purpose).decrypt(nonce, body, context.encode())
        except InvalidTag:
            continue
    return None
