"""What every command shares: settings, and the conditions a user can meet (broker down,
timeouts, bad files) turned into one-line errors with exit codes."""

from __future__ import annotations

import os
import re
import signal
import stat
import sys
from typing import Any

import click
from pydantic import ValidationError
from pydantic_settings import SettingsError

from schemas.base import check_name
from schemas.errors import validation_reason
from streams.logs import configure
from streams.settings import Settings

PORT = click.IntRange(0, 65535)
SECONDS = click.FloatRange(0, min_open=True)  # a wait: more than none


# control characters but line breaks and tabs: a terminal reads ESC, BEL or CSI in stored
# text (a turn anyone may write) as commands (a new title, a hidden line, a false link)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """Stored text as a terminal shows it and does not obey it: each control character
    written as its escape (`\x1b`)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def named(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A namespace or session id the service takes, refused as a usage error otherwise (a
    read of a name nothing can hold would only say "0 records")."""
    try:
        return value if value is None else check_name(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def settings() -> Settings:
    return _configured(Settings())


def _configured(s: Settings) -> Settings:
    """Logging as `s` says, and a warning for each LYCHEE_* variable that is no setting."""
    from streams.settings.unknown import unknown

    configure(s.observability.log_level, s.observability.log_format)
    for line in unknown(os.environ):
        click.echo(f"warning: {line}", err=True)
    return s


def served_settings() -> Settings:
    """Settings for a server in front of the stack (the gateway, the MCP server) or a worker
    of it: the configured stack, or the running `lychee up` when no LYCHEE_* connection
    variable is set (streams.stack.endpoints), as the client commands find it."""
    from streams.stack.endpoints import client_settings

    return _configured(client_settings())


def client_settings() -> Settings:
    """Settings for a command that is a Kafka client: the configured stack, or the running
    `lychee up` when no LYCHEE_* connection variable is set (streams.stack.endpoints). The
    client library's own error lines are silenced: a failure is reported once, as one line
    (`expected_error`)."""
    import logging

    from streams.stack.endpoints import client_settings

    s = _configured(client_settings())
    for name in ("aiokafka", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    return s


class Unavailable(click.ClickException):
    """Kafka or Redis cannot be reached (exit code 3)."""

    exit_code = 3


class TimedOut(click.ClickException):
    """The work did not finish within its time budget (exit code 4)."""

    exit_code = 4


def _piped() -> bool:
    """Whether standard output is a pipe or socket, which a reader can close."""
    try:
        mode = os.fstat(sys.stdout.fileno()).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _one_line(exc: BaseException | str) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 400 else text[:400] + "..."


def _invalid(exc: ValidationError) -> str:
    """Each refused field with the reason and the value given, in one line."""
    parts = []
    for e in exc.errors(include_url=False):
        where = _variable(exc.title, e["loc"]) or ".".join(str(p) for p in e["loc"]) or exc.title
        given = e.get("input")
        named = isinstance(given, str | int | float) and repr(given) not in e["msg"]
        shown = f" (got {_clipped(repr(given))})" if named else ""
        parts.append(f"{where}: {validation_reason(e)}{shown}")
    return _one_line("; ".join(parts))


def _variable(title: str, loc: tuple[int | str, ...]) -> str | None:
    """A settings group's refused field as the variable a user sets: a nested field's error
    names `params.delta`, its variable is LYCHEE_SEGMENTER__DELTA."""
    kinds = (info.annotation for info in Settings.model_fields.values())
    group = next((g for g in kinds if isinstance(g, type) and g.__name__ == title), None)
    info = group.model_fields.get(str(loc[0])) if group and loc else None
    if info is None or info.alias is None:
        return None
    return "__".join([info.alias, *(str(p).upper() for p in loc[1:])])


def _unparsed(exc: SettingsError) -> str:
    """The variable whose value could not be parsed (a list or a mapping is JSON), named
    with the value given; pydantic-settings names the field only."""
    found = re.search(r'field "(\w+)"', str(exc))
    field = found.group(1).upper() if found else None
    names = [n for n in os.environ if n.startswith("LYCHEE_") and field and n.endswith(field)]
    if len(names) != 1:
        return _one_line(exc)
    return f"{names[0]}: not valid JSON (got {_clipped(repr(os.environ[names[0]]))})"


def _clipped(text: str, at_most: int = 60) -> str:
    return text if len(text) <= at_most else text[: at_most - 3] + "..."


def expected_error(exc: BaseException) -> click.ClickException | None:
    """The one-line error (and exit code) for a condition a user can meet and fix; None for
    anything else, which is a bug and keeps its traceback."""
    from aiokafka.errors import KafkaConnectionError, KafkaError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import RedisError

    from schemas.errors import LycheeError
    from streams.errors import BrokerUnreachable

    if isinstance(exc, BrokerUnreachable):
        return Unavailable(str(exc))
    if isinstance(exc, KafkaConnectionError) or (
        isinstance(exc, KafkaError) and getattr(exc, "retriable", False)
    ):
        return Unavailable(
            f"cannot reach Kafka ({_one_line(exc)}); is `lychee up` running, and does "
            "LYCHEE_KAFKA_BOOTSTRAP point at it?"
        )
    if isinstance(exc, RedisConnectionError):
        return Unavailable(
            f"cannot reach Redis ({_one_line(exc)}); check LYCHEE_REDIS_URL or `lychee up`"
        )
    if isinstance(exc, TimeoutError):
        return TimedOut(f"timed out: {_one_line(exc)}")
    if isinstance(exc, ValidationError):
        return click.ClickException(f"invalid settings or input: {_invalid(exc)}")
    if isinstance(exc, SettingsError):
        return click.ClickException(f"invalid settings: {_unparsed(exc)}")
    if isinstance(exc, LycheeError):  # written to be read as it is
        return click.ClickException(_one_line(exc))
    if isinstance(exc, KafkaError | RedisError | ValueError | OSError):
        return click.ClickException(f"{type(exc).__name__}: {_one_line(exc)}")
    return None


class LycheeGroup(click.Group):
    """Turns the conditions a user meets (broker down, timeouts, bad files) into one-line
    errors with exit codes (1 error, 2 usage, 3 unavailable, 4 timed out): no traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except BrokenPipeError:
            if not _piped():
                raise
            # the reader went away (`lychee records NS | head`): stop quietly, as `cat` does;
            # what is still buffered goes nowhere instead of failing again at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise SystemExit(128 + signal.SIGPIPE) from None
        except Exception as exc:
            mapped = expected_error(exc)
            if mapped is None:
                raise
            raise mapped from exc
