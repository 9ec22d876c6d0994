"""Where a running `lychee up` can be reached, for clients in another shell.

The launcher writes its endpoints atomically to `DATA_DIR/endpoints.json` and to a well-known
per-user place (`$XDG_STATE_HOME/lychee/endpoints.json`, default `~/.local/state/lychee/`).
`client_settings()` reads the well-known file when no connection variable (`LYCHEE_KAFKA_BOOTSTRAP`,
`LYCHEE_REDIS_URL`, `LYCHEE_LANCEDB_URI`, in the environment or `.env`) is set: real variables
win, all together, so a client never mixes one stack's broker with another's Redis. A file
whose launcher is gone (kill -9 leaves it behind) is ignored; a second launcher leaves the
well-known file to the first while that one runs (`claim_endpoints`).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from streams.settings import Settings
from streams.stack.lock import pid_alive

ENDPOINTS_FILE = "endpoints.json"
# (group, field) of the settings that say where the stack is
CONNECTION_FIELDS = frozenset({("kafka", "bootstrap"), ("redis", "url"), ("store", "uri")})


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "lychee"


def well_known_path() -> Path:
    return state_dir() / ENDPOINTS_FILE


def process_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot: with the pid, it names one process
    (a pid alone can be reused after the launcher died)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat[stat.rindex(")") + 2 :].split()[19])
    return None


@dataclass(frozen=True)
class Endpoints:
    kafka_bootstrap: str
    redis_url: str
    lancedb_uri: str
    pid: int
    data_dir: str
    storage: str
    kafka_idempotence: bool = False  # Tansu has no InitProducerId
    pid_start: int | None = None
    s3_endpoint: str | None = None
    lancedb_storage_options: dict[str, str] = field(default_factory=dict)

    @property
    def alive(self) -> bool:
        if not pid_alive(self.pid):
            return False
        return self.pid_start is None or process_start(self.pid) in (None, self.pid_start)

    def settings_update(self) -> dict[str, dict[str, Any]]:
        """The settings' changes by group that point a client at this stack."""
        store: dict[str, Any] = {"uri": self.lancedb_uri}
        if self.lancedb_storage_options:
            store["storage_options"] = dict(self.lancedb_storage_options)
        return {
            "kafka": {"bootstrap": self.kafka_bootstrap, "idempotence": self.kafka_idempotence},
            "redis": {"url": self.redis_url},
            "store": store,
        }


def write_endpoints(endpoints: Endpoints, path: Path) -> None:
    """Atomically (a reader sees the old file or the new one), readable by the user only: it
    may carry object-store keys."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".endpoints-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(orjson.dumps(asdict(endpoints), option=orjson.OPT_INDENT_2))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def claim_endpoints(endpoints: Endpoints, path: Path) -> Endpoints | None:
    """`write_endpoints`, unless another live launcher holds `path`: then nothing is written
    and that launcher's endpoints are returned. Clients of the first stack keep finding it
    (a second one taking the file over would send them elsewhere without a word, and its stop
    would leave them none)."""
    holder = read_endpoints(path)
    if holder is not None and holder.pid != endpoints.pid:
        return holder
    write_endpoints(endpoints, path)
    return None


def read_endpoints(path: Path | None = None, live_only: bool = True) -> Endpoints | None:
    """The endpoints in `path` (default: the well-known file), or None when there is no
    readable file or, with `live_only`, when its launcher is gone."""
    path = path or well_known_path()
    try:
        data = orjson.loads(path.read_bytes())
        endpoints = Endpoints(**data)
    except (OSError, orjson.JSONDecodeError, TypeError):
        return None
    if live_only and not endpoints.alive:
        return None
    return endpoints


def remove_endpoints(path: Path, pid: int) -> None:
    """Remove the file if it is still ours (another launcher may have replaced it since)."""
    current = read_endpoints(path, live_only=False)
    if current is not None and current.pid == pid:
        path.unlink(missing_ok=True)


def client_settings() -> Settings:
    """Settings from the environment; when it sets no connection variable, the endpoints of
    the running `lychee up`, if there is one."""
    settings = Settings()
    if any(_given(settings, group, name) for group, name in CONNECTION_FIELDS):
        return settings
    endpoints = read_endpoints()
    if endpoints is None:
        return settings
    update = endpoints.settings_update()
    for group, name in (("kafka", "idempotence"), ("store", "storage_options")):
        if _given(settings, group, name):
            update[group].pop(name, None)
    return settings.replaced(**update)


def _given(settings: Settings, group: str, name: str) -> bool:
    """Whether the environment (or `.env`) set this field."""
    return name in getattr(settings, group).model_fields_set
