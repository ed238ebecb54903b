"""`[mcp.servers.oauth]`: how toolshell logs in to an `http` server (docs/configuration.md)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from toolshell.config.base import _Model

TokenAuthMethod = Literal["client_secret_basic", "client_secret_post", "none", "private_key_jwt"]


class OAuthConfig(_Model):
    """`[mcp.servers.oauth]`: how toolshell logs in to an `http` server (docs/configuration.md)."""

    enabled: bool = True
    grant: Literal["authorization_code", "client_credentials", "identity_assertion"] = "authorization_code"
    client_id: str | None = None
    """A client registered beforehand; without one, the client ID metadata document or dynamic registration."""
    client_secret_env: str | None = None
    """The name of the environment variable holding the client secret (never the secret itself)."""
    token_endpoint_auth_method: TokenAuthMethod | None = None
    private_key_env: str | None = None
    """For `private_key_jwt`: the name of the environment variable holding the PEM private key."""
    signing_algorithm: str = "RS256"
    client_metadata_url: str | None = None
    """An https URL of this client's metadata document, used as its client ID where the server supports it."""
    scopes: list[str] = Field(default_factory=list)
    issuer: str | None = None
    """The authorization server (its issuer URL) a configured client belongs to: metadata from any
    other issuer is refused, so the client's credentials are sent nowhere else."""
    allow_private: list[str] = Field(default_factory=list)
    """Private addresses (`host`, `host:port` or an IP) OAuth discovery may reach besides the server's own host."""
    assertion_command: list[str] = Field(default_factory=list)
    """For `identity_assertion`: the program (and arguments) that prints an ID-JAG (SEP-990)."""
    redirect_port: int | None = Field(default=None, ge=1, le=65535)
    login: Literal["explicit", "on_call"] = "explicit"
    """`explicit`: only `toolshell auth login` opens a browser; `on_call`: a call that needs a login starts one."""
    login_timeout_seconds: float = Field(default=300.0, gt=0)

    @field_validator("client_secret_env", "private_key_env")
    @classmethod
    def _names_a_variable(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v):
            raise ValueError(f'{info.field_name} takes the name of an environment variable, e.g. "GITHUB_SECRET"')
        return v

    def secret_variables(self) -> list[str]:
        """The environment variables whose values are this login's secrets (redacted everywhere)."""
        return [v for v in (self.client_secret_env, self.private_key_env) if v]

    @field_validator("issuer")
    @classmethod
    def _an_issuer_url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("https://", "http://")):
            raise ValueError(
                f"issuer {v!r} must be the authorization server's issuer URL, e.g. https://auth.example.com"
            )
        return v

    @field_validator("client_metadata_url")
    @classmethod
    def _https_with_a_path(cls, v: str | None) -> str | None:
        if v is not None and (not v.startswith("https://") or "/" not in v.removeprefix("https://").rstrip("/")):
            raise ValueError(f"client_metadata_url {v!r} must be an https URL with a path")
        return v

    @model_validator(mode="after")
    def _grant_has_what_it_needs(self) -> OAuthConfig:
        jwt = self.token_endpoint_auth_method == "private_key_jwt"
        if jwt and not (self.grant == "client_credentials" and self.private_key_env):
            raise ValueError('private_key_jwt needs grant = "client_credentials" and private_key_env')
        credential = self.private_key_env if jwt else self.client_secret_env
        if self.grant == "client_credentials" and not (self.client_id and credential):
            raise ValueError('grant = "client_credentials" needs client_id and client_secret_env (or private_key_env)')
        assertion = self.grant == "identity_assertion"
        if assertion and not (self.client_id and self.client_secret_env and self.issuer and self.assertion_command):
            raise ValueError(
                'grant = "identity_assertion" needs client_id, client_secret_env, issuer and assertion_command'
            )
        if assertion and self.token_endpoint_auth_method not in (None, "client_secret_basic", "client_secret_post"):
            raise ValueError('grant = "identity_assertion" takes client_secret_basic or client_secret_post')
        return self


__all__ = ["OAuthConfig", "TokenAuthMethod"]
