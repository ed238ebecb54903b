"""The state key ring: one for every worker, rotation without losing sealed state, never a
per-process key on a shared store."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from toolshell.errors import ToolshellError
from toolshell.store.keys import key_ring, new_key


def test_a_shared_store_without_a_ring_is_refused_naming_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ToolshellError) as err:
        key_ring(None, tmp_path, shared=True)
    assert "TOOLSHELL_STATE_KEYS" in err.value.message
    assert not (tmp_path / "state-key").exists(), "no per-process key was made"


def test_a_short_or_malformed_key_is_refused(tmp_path: Path) -> None:
    for bad in ("c2hvcnQ", "not base64 !!", f"{new_key()},short"):
        with pytest.raises(ToolshellError) as err:
            key_ring(bad, tmp_path, shared=True)
        assert "at least 32 bytes" in err.value.message


def test_the_local_key_is_made_once_private_and_the_same_for_every_process(tmp_path: Path) -> None:
    rings: list[list[bytes]] = []
    barrier = threading.Barrier(4)

    def start() -> None:
        barrier.wait()
        rings.append(key_ring(None, tmp_path, shared=False))

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(rings) == 4 and all(r == rings[0] for r in rings)
    assert (tmp_path / "state-key").stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["state-key"], "no temporary file is left"


def test_a_key_file_others_can_read_is_refused_with_the_chmod(tmp_path: Path) -> None:
    key_ring(None, tmp_path, shared=False)
    (tmp_path / "state-key").chmod(0o644)
    with pytest.raises(ToolshellError) as err:
        key_ring(None, tmp_path, shared=False)
    assert "chmod 600" in err.value.message
