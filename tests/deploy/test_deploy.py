"""Static checks of the deployment files: docker-compose.yml, deploy/Dockerfile, deploy/k8s.

No Docker and no network: the files are parsed and compared with the stages the code defines,
so that a stage added to the code without a service (or the reverse) fails here.
"""

from __future__ import annotations

import json
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


def test_dockerfile_installs_the_hashed_lock_then_the_project_alone() -> None:
    runs = [line for line in DOCKERFILE.read_text().splitlines() if line.startswith("RUN ")]
    lock_at = next(i for i, line in enumerate(runs) if "--require-hashes" in line)
    project_at = next(
        i for i, line in enumerate(runs) if re.search(r"pip install .*--no-deps", line)
    )
    assert "requirements/runtime.txt" in runs[lock_at]
    assert lock_at < project_at
    text = DOCKERFILE.read_text()
    assert "download.pytorch.org/whl/cpu" in text
    locked = (ROOT / "requirements" / "runtime.txt").read_text()
    assert re.search(r"^torch==[0-9.]+\+cpu \\$", locked, re.M), (
        "the image's torch is the CPU build"
    )
    assert "--hash=sha256:" in locked


def test_every_lock_pins_each_package_with_hashes() -> None:
    for name in ("tools.txt", "dev.txt", "runtime.txt"):
        text = (ROOT / "requirements" / name).read_text()
        pins = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+) \\$", text, re.M)
        assert pins, name
        blocks = re.split(r"^(?=[A-Za-z0-9_.-]+==)", text, flags=re.M)[1:]
        assert all("--hash=sha256:" in block for block in blocks), name


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


# -- gateway and metrics ---------------------------------------------------------------------

PROMETHEUS = ROOT / "deploy" / "prometheus" / "prometheus.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "lychee.json"


def _gateway_port(command: list[str]) -> int:
    return int(command[command.index("--port") + 1])


def test_compose_gateway_listens_beyond_loopback_only_with_api_keys(
    services: dict[str, dict[str, Any]],
) -> None:
    gateway = services["gateway"]
    command = gateway["command"]
    assert command[0] == "gateway" and command[command.index("--host") + 1] == "0.0.0.0"
    env = _environment(gateway)
    keys = env["LYCHEE_API_KEYS_FILE"]  # `lychee gateway` refuses 0.0.0.0 without keys
    mounts = {v.split(":")[1]: v.split(":")[0] for v in gateway["volumes"]}
    assert any(keys.startswith(target + "/") for target in mounts), (keys, mounts)
    assert env["LYCHEE_KAFKA_BOOTSTRAP"] == "kafka:9092" and all(env.get(k) for k in REQUIRED_ENV)
    port = _gateway_port(command)
    assert f"127.0.0.1:{port}:{port}" in gateway["ports"]
    assert f"127.0.0.1:{port}/readyz" in " ".join(gateway["healthcheck"]["test"])
    deps = _depends_on(gateway)
    assert deps["kafka"]["condition"] == "service_healthy"
    assert deps["topics"]["condition"] == "service_completed_successfully"


@pytest.mark.parametrize("stage", STAGES)
def test_compose_worker_serves_metrics_on_a_fixed_port(
    services: dict[str, dict[str, Any]], stage: str
) -> None:
    env = _environment(_service_for(services, stage))
    assert env["LYCHEE_METRICS_HOST"] == "0.0.0.0" and int(env["LYCHEE_METRICS_PORT"]) > 0


def test_compose_monitoring_profile_scrapes_every_stage_and_the_gateway(
    services: dict[str, dict[str, Any]],
) -> None:
    for name in ("prometheus", "grafana"):
        assert services[name]["profiles"] == ["monitoring"], name
    assert (
        "./deploy/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro"
        in (services["prometheus"]["volumes"])
    )
    config = yaml.safe_load(PROMETHEUS.read_text())
    targets: dict[str, int] = {}
    for job in config["scrape_configs"]:
        for sd in job["dns_sd_configs"]:
            targets.update({name: sd["port"] for name in sd["names"]})
    metrics_port = int(_environment(_service_for(services, STAGES[0]))["LYCHEE_METRICS_PORT"])
    assert targets == {
        **{s: metrics_port for s in STAGES},
        "gateway": _gateway_port(services["gateway"]["command"]),
    }
    mounts = " ".join(services["grafana"]["volumes"])
    assert "./deploy/grafana/provisioning:" in mounts and "./deploy/grafana/dashboards:" in mounts


def test_grafana_dashboard_queries_only_metrics_the_code_defines() -> None:
    from prometheus_client.metrics import MetricWrapperBase

    from streams import metrics

    defined = {
        m._name for m in vars(metrics).values() if isinstance(m, MetricWrapperBase)
    }  # Counter names without `_total`
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    used = {
        re.sub(r"_(total|bucket|count|sum)$", "", name)
        for e in exprs
        for name in re.findall(r"\blychee_[a-z_]+", e)
    }
    assert used and used <= defined, used - defined
    assert defined <= used, f"metrics no panel shows: {defined - used}"


def test_k8s_gateway_runs_with_keys_from_a_secret_behind_a_service() -> None:
    docs = _k8s_documents()
    deployment = next(
        d for d in docs if d["kind"] == "Deployment" and "gateway" in d["metadata"]["name"]
    )
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["args"][0] == "gateway" and "0.0.0.0" in container["args"]
    keys = next(e["value"] for e in container["env"] if e["name"] == "LYCHEE_API_KEYS_FILE")
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    secret_volume = next(v["name"] for v in pod["volumes"] if "secret" in v)
    assert keys.startswith(mounts[secret_volume] + "/")
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    service = next(d for d in docs if d["kind"] == "Service" and "gateway" in d["metadata"]["name"])
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()


def test_k8s_every_deployment_is_scraped_on_the_port_it_serves_metrics_on() -> None:
    docs = _k8s_documents()
    env = next(d["data"] for d in docs if d["kind"] == "ConfigMap")
    for deployment in (d for d in docs if d["kind"] == "Deployment"):
        template = deployment["spec"]["template"]
        notes = template["metadata"]["annotations"]
        container = template["spec"]["containers"][0]
        assert notes["prometheus.io/scrape"] == "true" and notes["prometheus.io/path"] == "/metrics"
        ports = {p["containerPort"] for p in container["ports"]}
        assert int(notes["prometheus.io/port"]) in ports, deployment["metadata"]["name"]
        if container["args"][0] == "worker":
            assert int(notes["prometheus.io/port"]) == int(env["LYCHEE_METRICS_PORT"])
            assert env["LYCHEE_METRICS_HOST"] == "0.0.0.0"
        else:
            assert int(notes["prometheus.io/port"]) == _gateway_port(container["args"])
