"""deploy/kubernetes/ is checked against what runs (issue 23, §1), so it cannot drift: the
container's command line parses with `toolshell serve`'s own options, the config file in the
ConfigMap loads, the probes name the worker's real probe paths (a worker started with the
manifest's command line answers them), the grace period covers the drain, and every name one
manifest gives another (labels, the Secret's keys, the Service's port) matches."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml

from _serve_auth_support import serving
from toolshell.config import load_text
from toolshell.config.serve import ServeConfig
from toolshell.frontends.cli.serve import serve
from toolshell.frontends.serve.auth import TOKEN_ENV
from toolshell.frontends.serve.health import LIVE_PATH, READY_PATH

pytestmark = pytest.mark.anyio
DEPLOY = Path(__file__).resolve().parent.parent / "deploy" / "kubernetes"
KINDS = {"Secret", "ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "Ingress"}


def _manifests() -> dict[str, dict[str, Any]]:
    """Every document of every file, by kind (one of each)."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            assert doc["kind"] not in found, f"two {doc['kind']} manifests"
            found[doc["kind"]] = doc
    return found


MANIFESTS = _manifests()
POD = MANIFESTS["Deployment"]["spec"]["template"]["spec"]
[CONTAINER] = POD["containers"]


def test_there_is_one_manifest_of_each_kind_a_deployment_needs() -> None:
    assert set(MANIFESTS) == KINDS


def test_the_container_command_line_parses_with_the_serve_command_options() -> None:
    args = CONTAINER["args"]
    assert args[0] == "serve"
    params = serve.make_context("serve", list(args[1:])).params  # an unknown option raises here
    [port] = CONTAINER["ports"]
    assert params["use_http"] and params["allow_remote"]
    assert params["port"] == port["containerPort"]
    mounts = {m["name"]: m["mountPath"] for m in CONTAINER["volumeMounts"]}
    assert Path(params["config_path"]).parent == Path(mounts["config"])
    assert params["state_dir"] == mounts["state"]


def _config() -> ServeConfig:
    configmap = MANIFESTS["ConfigMap"]
    [(name, text)] = configmap["data"].items()
    config_file = Path(serve.make_context("serve", list(CONTAINER["args"][1:])).params["config_path"]).name
    assert name == config_file, "the ConfigMap holds the file the command line names"
    return load_text(text, source=f"deploy/kubernetes ConfigMap {name}").serve


def test_the_grace_period_covers_the_drain_and_the_config_loads() -> None:
    serve_config = _config()
    assert serve_config.allowed_hosts and serve_config.trusted_proxies
    assert POD["terminationGracePeriodSeconds"] >= serve_config.drain_seconds + 5


def test_the_probes_name_the_worker_probe_paths_on_its_port() -> None:
    assert CONTAINER["livenessProbe"]["httpGet"] == {"path": LIVE_PATH, "port": "http"}
    assert CONTAINER["readinessProbe"]["httpGet"] == {"path": READY_PATH, "port": "http"}
    assert [p["name"] for p in CONTAINER["ports"]] == ["http"]


def test_the_environment_comes_from_the_secret_under_the_names_the_worker_reads() -> None:
    secret_keys = set(MANIFESTS["Secret"]["stringData"])
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in CONTAINER["env"]}
    assert set(env) == {"TOOLSHELL_STATE_URL", ServeConfig().state_keys_env, TOKEN_ENV}
    assert {ref["name"] for ref in env.values()} == {MANIFESTS["Secret"]["metadata"]["name"]}
    assert {ref["key"] for ref in env.values()} == secret_keys


def test_the_service_budget_and_ingress_find_the_workers() -> None:
    labels = MANIFESTS["Deployment"]["spec"]["template"]["metadata"]["labels"]
    service = MANIFESTS["Service"]
    assert MANIFESTS["Deployment"]["spec"]["selector"]["matchLabels"] == labels
    assert service["spec"]["selector"] == labels
    assert MANIFESTS["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"] == labels
    [port] = service["spec"]["ports"]
    assert port["targetPort"] == "http"
    [rule] = MANIFESTS["Ingress"]["spec"]["rules"]
    backend = rule["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": service["metadata"]["name"], "port": {"name": port["name"]}}
    assert rule["host"] in _config().allowed_hosts, "the Ingress's host is one the workers answer to"


async def test_a_worker_with_the_configmap_config_answers_the_probes_the_manifest_names(tmp_path: Path) -> None:
    """On loopback and a free port (tests bind 127.0.0.1 only); the kubelet's Host is the pod IP."""
    [text] = MANIFESTS["ConfigMap"]["data"].values()
    probes = [CONTAINER[probe]["httpGet"]["path"] for probe in ("livenessProbe", "readinessProbe")]
    with serving(tmp_path / "state", config=text, env={TOKEN_ENV: "t" * 40}) as worker:
        base = worker.url.removesuffix("/mcp")
        async with httpx2.AsyncClient() as http:
            answers = [(await http.get(base + path, headers={"Host": "10.1.2.3:8765"})).text for path in probes]
    assert answers == ["ok\n", "ready\n"]
