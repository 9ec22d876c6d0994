"""Static checks of the deployment files: docker-compose.yml, deploy/Dockerfile, deploy/k8s.

No Docker and no network: the files are parsed and compared with the stages the code defines,
so that a stage added to the code without a service (or the reverse) fails here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from streams.apps import STAGES

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
K8S = ROOT / "deploy" / "k8s"
REQUIRED_ENV = ("LYCHEE_KAFKA_BOOTSTRAP", "LYCHEE_REDIS_URL", "LYCHEE_LANCEDB_URI")


def _merged(node: dict[str, Any]) -> dict[str, Any]:
    """Resolve a leftover `<<` merge key (safe_load resolves them already; this is a guard)."""
    if "<<" not in node:
        return node
    bases = node["<<"] if isinstance(node["<<"], list) else [node["<<"]]
    out: dict[str, Any] = {}
    for base in bases:
        out.update(_merged(base))
    out.update({k: v for k, v in node.items() if k != "<<"})
    return out


def _environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        pairs = (item.split("=", 1) for item in env)
        return {kv[0]: kv[1] if len(kv) > 1 else "" for kv in pairs}
    return {k: "" if v is None else str(v) for k, v in _merged(env).items()}


def _depends_on(service: dict[str, Any]) -> dict[str, Any]:
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return {name: {} for name in deps}
    return _merged(deps)


@pytest.fixture(scope="module")
def services() -> dict[str, dict[str, Any]]:
    compose = yaml.safe_load(COMPOSE.read_text())
    return {name: _merged(svc) for name, svc in compose["services"].items()}


def _worker_services(services: dict[str, dict[str, Any]]) -> Iterator[tuple[str, str]]:
    for name, svc in services.items():
        command = svc.get("command")
        if isinstance(command, list) and command[:1] == ["worker"]:
            yield name, command[1]


def _service_for(services: dict[str, dict[str, Any]], stage: str) -> dict[str, Any]:
    matches = [services[name] for name, s in _worker_services(services) if s == stage]
    assert len(matches) == 1, f"expected one compose service running `worker {stage}`"
    return matches[0]


def test_compose_names_every_worker_stage(services: dict[str, dict[str, Any]]) -> None:
    for stage in STAGES:
        assert services[stage]["command"] == ["worker", stage]


def test_compose_runs_only_known_stages(services: dict[str, dict[str, Any]]) -> None:
    assert {stage for _, stage in _worker_services(services)} == set(STAGES)


@pytest.mark.parametrize("stage", STAGES)
def test_compose_worker_builds_from_deploy_dockerfile(
    services: dict[str, dict[str, Any]], stage: str
) -> None:
    build = _service_for(services, stage)["build"]
    assert build["dockerfile"] == "deploy/Dockerfile"
    assert build["context"] == "."


@pytest.mark.parametrize("stage", STAGES)
def test_compose_worker_waits_for_healthy_kafka_redis_and_topics(
    services: dict[str, dict[str, Any]], stage: str
) -> None:
    deps = _depends_on(_service_for(services, stage))
    assert deps["kafka"]["condition"] == "service_healthy"
    assert deps["redis"]["condition"] == "service_healthy"
    assert deps["topics"]["condition"] == "service_completed_successfully"


@pytest.mark.parametrize("stage", STAGES)
def test_compose_worker_environment_has_connection_settings(
    services: dict[str, dict[str, Any]], stage: str
) -> None:
    env = _environment(_service_for(services, stage))
    assert all(env.get(key) for key in REQUIRED_ENV), env
    assert env["LYCHEE_KAFKA_BOOTSTRAP"] == "kafka:9092"
    assert env["LYCHEE_REDIS_URL"].startswith("redis://redis:")


@pytest.mark.parametrize("stage", STAGES)
def test_compose_worker_lancedb_uri_sits_on_shared_volume(
    services: dict[str, dict[str, Any]], stage: str
) -> None:
    svc = _service_for(services, stage)
    assert "lancedb:/data" in svc["volumes"]
    assert _environment(svc)["LYCHEE_LANCEDB_URI"].startswith("/data/")


def test_compose_topics_service_runs_once(services: dict[str, dict[str, Any]]) -> None:
    topics = services["topics"]
    assert topics["command"] == ["topics", "create"]
    assert topics["restart"] == "no"
    assert _environment(topics)["LYCHEE_KAFKA_BOOTSTRAP"] == "kafka:9092"


def test_compose_kafka_runs_kraft_without_auto_create(services: dict[str, dict[str, Any]]) -> None:
    kafka = services["kafka"]
    env = _environment(kafka)
    assert "controller" in env["KAFKA_PROCESS_ROLES"].split(",")
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    assert "PLAINTEXT://kafka:9092" in env["KAFKA_ADVERTISED_LISTENERS"]
    assert "kafka-topics.sh" in " ".join(kafka["healthcheck"]["test"])


def test_compose_redis_is_version_7_with_aof(services: dict[str, dict[str, Any]]) -> None:
    redis = services["redis"]
    assert redis["image"].startswith("redis:7")
    assert "--appendonly" in redis["command"]
    assert redis["volumes"]


def test_dockerfile_pins_cpu_torch_before_project_install() -> None:
    runs = [line for line in DOCKERFILE.read_text().splitlines() if line.startswith("RUN ")]
    torch_at = next(i for i, line in enumerate(runs) if "pip install torch==2.13.0" in line)
    project_at = next(
        i for i, line in enumerate(runs) if re.search(r"pip install \.|pip install \"\.\[", line)
    )
    assert "download.pytorch.org/whl/cpu" in runs[torch_at]
    assert torch_at < project_at


def test_dockerfile_runs_lychee_as_non_root_offline() -> None:
    lines = [line.strip() for line in DOCKERFILE.read_text().splitlines()]
    assert 'ENTRYPOINT ["lychee"]' in lines
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    assert any("HF_HUB_OFFLINE=1" in line for line in lines)


def test_dockerignore_excludes_venv_and_data() -> None:
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".venv", "data", ".git", "tests"} <= ignored


def _k8s_documents() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(K8S.glob("*.yaml")):
        docs.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return docs


def test_k8s_kustomization_lists_existing_files() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    for resource in kustomization["resources"]:
        assert (K8S / resource).is_file(), resource


@pytest.mark.parametrize("stage", STAGES)
def test_k8s_deployment_names_its_stage(stage: str) -> None:
    deployments = [d for d in _k8s_documents() if d["kind"] == "Deployment"]
    matches = [d for d in deployments if stage in d["metadata"]["name"]]
    assert len(matches) == 1, f"expected one Deployment for {stage}"
    container = matches[0]["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["worker", stage]
    assert container["image"] == "lychee-memory:latest"
    assert container["resources"]["requests"]


def test_k8s_deployments_read_env_from_the_configmap() -> None:
    docs = _k8s_documents()
    configmaps = {d["metadata"]["name"]: d["data"] for d in docs if d["kind"] == "ConfigMap"}
    for deployment in (d for d in docs if d["kind"] == "Deployment"):
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        refs = [src["configMapRef"]["name"] for src in container["envFrom"]]
        env = {k: v for ref in refs for k, v in configmaps[ref].items()}
        assert all(env.get(key) for key in REQUIRED_ENV), deployment["metadata"]["name"]
