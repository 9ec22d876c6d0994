"""Failures that are not a message's fault, and how a stage waits them out (DESIGN §9).

Two kinds pause a stage instead of dead-lettering its input:
- transient (`rules.is_transient`): a dependency is down, rate-limited or refusing our
  configuration; it comes back by itself or once someone fixes the configuration;
- systemic: our own code, or a library that does not fit it, fails. `is_programming_error`
  names the errors no message should cause (AssertionError, TypeError, AttributeError,
  ImportError, NameError, NotImplementedError, also as the cause of a wrapping error), and
  `Streak` catches the rest: `TransientPolicy.systemic_streak` consecutive messages failing
  with the same error, raised at the same place, stop being treated as poison.
One tenant must not pause a stage shared by all: a streak whose messages all come from one
namespace is that namespace's input until another confirms it (`Streak.verdict`). A
programming error pauses at once only for messages naming no namespace; otherwise it pauses
when a second namespace's message fails with it, and until then the one namespace's
messages are dead-lettered with the reason (replayable once mended).
A paused stage retries the same work with backoff, says why once per `log_every_s`, and is
visible as `lychee_stage_paused_since_seconds` (which `lychee status` reads); its input stays
where it is until the cause is mended.
"""

from __future__ import annotations

import time
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import structlog

from streams import metrics
from workers.errors import Refused

log = structlog.get_logger("lychee.guard")

PROGRAMMING_ERRORS: tuple[type[BaseException], ...] = (
    AssertionError,
    TypeError,
    AttributeError,
    ImportError,
    NameError,
    NotImplementedError,
)

TRANSIENT, SYSTEMIC = "transient", "systemic"

# What a message that failed for good becomes (`Streak.verdict`).
POISON, TENANT, PAUSE = "poison", "tenant", "pause"

T = TypeVar("T")


def is_programming_error(exc: BaseException) -> bool:
    """A failure of our code or of a library that does not fit it: no message causes these.

    The chain of explicit causes is followed, since the wrappers of vendor clients translate
    errors (`raise X from exc`) and a TypeError inside an SDK call may arrive as the
    wrapper's own error.
    """
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, PROGRAMMING_ERRORS):
            return True
        seen = seen.__cause__
    return False


def signature(exc: BaseException) -> tuple[str, str]:
    """The same error, as far as a streak is concerned: its type and where it was raised."""
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return type(exc).__name__, where


class Streak:
    """Consecutive messages of one stage that failed with the same error, and the namespaces
    they came from (None for a message that names none)."""

    def __init__(self) -> None:
        self.key: tuple[str, str] | None = None
        self.count = 0
        self.tenants: set[str | None] = set()

    def failed(self, exc: BaseException, tenant: str | None = None) -> int:
        """Count one more failed message (of namespace `tenant`); returns the length of its
        streak."""
        key = signature(exc)
        if key != self.key:
            self.count, self.tenants = 0, set()
        self.count += 1
        self.tenants.add(tenant)
        self.key = key
        return self.count

    def sole_tenant(self) -> str | None:
        """The namespace every message of the streak came from, when there is one: then the
        streak may be that namespace's input, not our code, and one tenant must not pause the
        stage for all."""
        if len(self.tenants) == 1:
            (tenant,) = self.tenants
            return tenant
        return None

    def verdict(self, exc: BaseException, systemic_streak: int) -> str:
        """What the message that just failed with `exc` (counted by `failed`) becomes.

        - PAUSE when the error is not one tenant's: a programming error whose streak spans
          two namespaces or holds a message naming none (a broken library fails everyone's
          messages, so a second tenant confirms it), or any other error repeated for
          `systemic_streak` messages in a row across namespaces;
        - TENANT when every message of a streak that would pause came from one namespace:
          that tenant's input may be what trips our code, and one tenant must not stop the
          stage for all; the message is dead-lettered with the streak named;
        - POISON otherwise: dead-lettered as the message's own fault.
        """
        if not is_programming_error(exc) and self.count < systemic_streak:
            return POISON
        return TENANT if self.sole_tenant() is not None else PAUSE

    def succeeded(self) -> None:
        self.key, self.count, self.tenants = None, 0, set()

    def matches(self, exc: BaseException) -> bool:
        return self.key is not None and signature(exc) == self.key


def tenant_of(value: object) -> str | None:
    """The namespace a parsed message belongs to, None when it names none; a stage that
    parses a message with where it was read (a tuple) names it by the message, first."""
    if isinstance(value, tuple) and value:
        value = value[0]
    namespace = getattr(value, "namespace", None)
    return namespace if isinstance(namespace, str) else None


def taking_turns(items: Sequence[T], tenant: Callable[[T], str | None]) -> list[T]:
    """`items` reordered so that namespaces take turns, each keeping its own order; an item
    naming no namespace stays between what came before it and what came after.

    A batch that failed is handled one message at a time to find the culprit: taking turns
    puts another tenant's message right after a failure, so a library that fails everyone's
    messages is recognised after one dead letter, not after a whole run of one tenant's.
    """
    out: list[T] = []
    runs: dict[str, deque[T]] = {}  # since the last item naming no namespace

    def flush() -> None:
        while runs:
            for ns in list(runs):
                out.append(runs[ns].popleft())
                if not runs[ns]:
                    del runs[ns]

    for item in items:
        if (ns := tenant(item)) is None:
            flush()
            out.append(item)
        else:
            runs.setdefault(ns, deque()).append(item)
    flush()
    return out


_streaks: dict[str, Streak] = {}


def streak_of(stage: str) -> Streak:
    """The failure streak of `stage` in this process (one per stage: messages come in order)."""
    return _streaks.setdefault(stage, Streak())


class PauseLog:
    """One line when a pause starts, then one per `every_s`, and one when it ends; the pause
    is a metric for as long as it lasts."""

    def __init__(self, what: str, every_s: float, stage: str | None = None) -> None:
        self.what = what
        self.every_s = every_s
        self.stage = stage or what.split(" ", 1)[0]
        self.started: float | None = None
        self.last = 0.0
        self.labels: tuple[str, str, str] | None = None

    def failed(self, attempt: int, exc: BaseException | None, kind: str = TRANSIENT) -> None:
        now = time.monotonic()
        if self.started is None:
            self.started = now
            self._metric(exc, kind)
        elif now - self.last < self.every_s:
            return
        self.last = now
        fields: dict[str, Any] = {
            "what": self.what,
            "kind": kind,
            "attempt": attempt,
            "paused_s": round(now - self.started, 1),
            "error": describe(exc, 500) if exc else None,
            "effect": "retrying the same work; nothing is dropped",
        }
        if (rate := getattr(exc, "tokens_per_s", None)) is not None:
            fields["llm_tokens_per_s"] = round(rate, 2)  # slow, not down
        if kind == SYSTEMIC:
            hint = (
                "not the message's fault: our code, a library that does not fit it, or the "
                "configuration; mend it and restart the worker (its input stays where it is)"
            )
            log.error("stage.paused", **fields, hint=hint)
        elif isinstance(exc, Refused):
            log.error("stage.paused", **fields, hint=exc.hint or "check the configuration")
        else:
            log.warning("stage.paused", **fields)

    def _metric(self, exc: BaseException | None, kind: str) -> None:
        self.labels = (self.stage, kind, type(exc).__name__ if exc else "")
        metrics.pause_started(*self.labels)

    def succeeded(self, attempts: int) -> None:
        if self.started is None:
            return
        log.info(
            "stage.resumed",
            what=self.what,
            attempts=attempts,
            paused_s=round(time.monotonic() - self.started, 1),
        )
        self.close()

    def close(self) -> None:
        """The pause is over, whichever way it ended."""
        if self.labels is not None:
            metrics.pause_ended(*self.labels)
            self.labels = None
        self.started = None


def describe(exc: BaseException, limit: int = 2000) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= limit else text[:limit] + "..."
