"""`[[triggers]]` entries: a saved script run by a cron schedule or a webhook."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from toolshell.config.cron import CronSchedule
from toolshell.config.names import check_name
from toolshell.errors import ToolshellError


class TriggerConfig(BaseModel):
    """One `[[triggers]]` entry of the config."""

    model_config = ConfigDict(extra="forbid")

    name: str
    script: str
    schedule: str | None = None
    """Five-field cron, e.g. `"*/15 9-17 * * mon-fri"`, in the machine's time zone."""
    webhook: bool = False
    """Serve `POST /hooks/<name>`; a JSON object body is merged over `input`."""
    input: dict[str, Any] = Field(default_factory=dict)
    secret_env: str | None = None
    """The environment variable holding the bearer token the webhook requires."""
    allow_unauthenticated: bool = False
    """Serve this webhook without a token (anyone who can reach the port fires it); needed without `secret_env`."""

    @field_validator("name", "script")
    @classmethod
    def _usable_name(cls, v: str) -> str:
        try:
            check_name(v)
        except ToolshellError as e:
            raise ValueError(e.message) from None
        return v

    @field_validator("schedule")
    @classmethod
    def _schedule_parses(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                CronSchedule.parse(v)
            except ToolshellError as e:
                raise ValueError(e.message) from None
        return v

    @model_validator(mode="after")
    def _does_something(self) -> TriggerConfig:
        if self.schedule is None and not self.webhook:
            raise ValueError(f'trigger {self.name!r} needs schedule = "0 9 * * mon-fri" or webhook = true')
        if self.secret_env is not None and not self.webhook:
            raise ValueError(f"trigger {self.name!r}: secret_env applies only to webhooks; add webhook = true")
        if self.allow_unauthenticated and self.secret_env is not None:
            raise ValueError(f"trigger {self.name!r}: allow_unauthenticated = true and secret_env contradict; keep one")
        return self
