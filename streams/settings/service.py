"""What faces people and operators: the gateway and MCP, the embedded stack, metrics, logs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import BeforeValidator, Field, model_validator

from streams.settings.group import Group, config

DAY_S = 24 * 3600
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _unset_when_empty(value: object) -> object:
    """An empty variable (`LYCHEE_API_KEYS_FILE=`) as unset, not as the current directory."""
    return None if value == "" else value


def _level(value: object) -> object:
    if isinstance(value, str) and value.upper() in LEVELS:
        return value.upper()
    raise ValueError(f"a level is one of {', '.join(LEVELS)}")


class GatewaySettings(Group):
    """`lychee gateway` and `lychee mcp`."""

    model_config = config("gateway_")

    host: str = Field(default="127.0.0.1", description="where lychee gateway listens")
    port: int = Field(default=8080, ge=0, le=65535, description="its port")
    api_keys_file: Annotated[Path | None, BeforeValidator(_unset_when_empty)] = Field(
        default=None,
        alias="LYCHEE_API_KEYS_FILE",
        description="JSON file of hashed API keys and their namespaces; unset: loopback only",
    )
    max_in_flight: int = Field(
        default=256,
        ge=1,
        description="requests served at once; more wait, then get 503 (four times this: "
        "connections open at once)",
    )
    queue_timeout_s: float = Field(
        default=10.0, gt=0, description="how long a request waits for a slot or its session"
    )
    body_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="how long a request's body may take to arrive once it holds a slot (408)",
    )
    header_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="how long a connection may take to send a request's headers (from when "
        "it opens, or its previous answer) before it is closed: slowloris",
    )
    keys_ttl_s: float = Field(
        default=2.0,
        gt=0,
        description="how often the gateway looks at LYCHEE_API_KEYS_FILE again: a key added "
        "or revoked counts within this time, without a restart",
    )
    max_exchanges: int = Field(default=1000, ge=1, description="exchanges per request")
    max_body_bytes: int = Field(
        default=16 * 1024 * 1024, ge=1024, description="largest request body"
    )
    produce_timeout_s: float = Field(
        default=10.0, gt=0, description="wait for the broker's acks of one add"
    )
    connect_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="how long a call of the gateway or lychee mcp waits for the stack while "
        "not connected yet (both start without it and connect on the next call)",
    )
    max_timeout_s: float = Field(
        default=60.0, gt=0, description="the longest search (and wait_for) a caller may ask for"
    )
    seq_ttl_s: int = Field(
        default=30 * DAY_S,
        ge=60,
        alias="LYCHEE_SEQ_TTL_S",
        description="how long a session's exchange ids are remembered for idempotent re-adds",
    )
    mcp_namespace: str | None = Field(
        default=None,
        alias="LYCHEE_MCP_NAMESPACE",
        description="lychee mcp: the only namespace it serves; /mcp: the namespace tools use "
        "when a call names none",
    )


class StackSettings(Group):
    """Supervision by `lychee up`: a worker that exits is restarted after a backoff that
    doubles up to its maximum; that many exits within the window mark its stage failed."""

    model_config = config("")

    restart_backoff_s: float = Field(default=1.0, gt=0, description="first restart backoff")
    restart_backoff_max_s: float = Field(default=30.0, gt=0, description="longest backoff")
    restart_max_crashes: int = Field(
        default=5, ge=1, description="exits within the window that mark a stage failed"
    )
    restart_window_s: float = Field(default=300.0, gt=0, description="that window")
    drain_grace_s: float = Field(
        default=60.0,
        ge=0,
        description="how long Ctrl-C lets the stages drain before they stop (lychee up --grace)",
    )

    @model_validator(mode="after")
    def _backoff_within_its_maximum(self) -> Self:
        if self.restart_backoff_s > self.restart_backoff_max_s:
            raise ValueError(
                f"LYCHEE_RESTART_BACKOFF_S {self.restart_backoff_s:g} is above "
                f"LYCHEE_RESTART_BACKOFF_MAX_S {self.restart_backoff_max_s:g}"
            )
        return self


class ObservabilitySettings(Group):
    """Prometheus metrics of the workers (the gateway serves /metrics on its own port), logs."""

    model_config = config("")

    metrics_enabled: bool = Field(default=True, description="workers serve Prometheus metrics")
    metrics_host: str = Field(default="127.0.0.1", description="where they listen")
    metrics_port: int = Field(
        default=0, ge=0, le=65535, description="0: a free port (several workers on one host)"
    )
    metrics_heartbeat_s: float = Field(
        default=10.0, gt=0, description="how often a process re-registers its metrics endpoint"
    )
    log_level: Annotated[str, BeforeValidator(_level)] = Field(
        default="INFO", description="structlog's level: DEBUG, INFO, WARNING, ERROR or CRITICAL"
    )
    log_format: Literal["auto", "json", "console"] = Field(
        default="auto", description="auto: JSON lines when not on a TTY"
    )
