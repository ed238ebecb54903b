"""What every config model shares: unknown keys refused, and the bound on times."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

_YEAR = 365 * 24 * 3600.0
"""The longest time any setting may be: longer ones overflow the timers (a `1e400` is `inf`)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)
