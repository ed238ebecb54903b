"""The tables of approval requests and grants (`policy.approvals` reads and writes them).

`{serial}` is the engine's auto-increment key type (`StateStore.migrate` fills it in).
"""

from __future__ import annotations

SCHEMA = """
CREATE TABLE IF NOT EXISTS approval_requests (
    id TEXT PRIMARY KEY,
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    command TEXT NOT NULL,
    input TEXT NOT NULL,
    session_id TEXT NOT NULL,
    why TEXT,
    message TEXT NOT NULL DEFAULT '',
    fingerprint TEXT NOT NULL,
    status TEXT NOT NULL,           -- pending | granted_once | granted_always | denied | expired
    created_at DOUBLE PRECISION NOT NULL,
    decided_at DOUBLE PRECISION,
    caller TEXT,                    -- who made the call (`Session.caller`); NULL: this machine's user
    server_id TEXT,                 -- the program serving the tool (`ToolEntry.server_id`)
    server_label TEXT               -- that program for people, secrets masked
);
CREATE INDEX IF NOT EXISTS approval_requests_open ON approval_requests (status, server, tool, input);
CREATE TABLE IF NOT EXISTS approval_grants (
    id {serial},
    request_id TEXT,
    kind TEXT NOT NULL,             -- once | always
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    input TEXT,                     -- canonical JSON, for `once`
    fingerprint TEXT NOT NULL,
    state TEXT NOT NULL,            -- active | used | voided
    created_at DOUBLE PRECISION NOT NULL,
    ended_at DOUBLE PRECISION,
    server_id TEXT,                 -- the program it was given for; NULL: made before grants recorded it
    server_label TEXT
);
CREATE INDEX IF NOT EXISTS approval_grants_tool ON approval_grants (server, tool, kind, state);
"""
NEWER_COLUMNS = [  # columns a state made by an older version lacks
    ("approval_requests", "caller"),
    ("approval_requests", "server_id"),
    ("approval_requests", "server_label"),
    ("approval_grants", "server_id"),
    ("approval_grants", "server_label"),
    ("approval_requests", "decided_by"),
]
"""Columns a state made by an older version lacks (added where missing)."""

__all__ = ["NEWER_COLUMNS", "SCHEMA"]
