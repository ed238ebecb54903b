"""The container image: `Containerfile` and `scripts/build_image.sh` describe the same image, the one
deploy/kubernetes runs; with TOOLSHELL_IMAGE_TEST=1 (as root) the Debian build is made, started
under an OCI runtime and probed (`scripts/image_check.sh`; 4-6 minutes, so not by default)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from toolshell.frontends.cli.serve import serve
from toolshell.frontends.serve.health import LIVE_PATH

ROOT = Path(__file__).resolve().parent.parent
CONTAINERFILE = (ROOT / "Containerfile").read_text(encoding="utf-8")
BUILD = ROOT / "scripts" / "build_image.sh"
CHECK = ROOT / "scripts" / "image_check.sh"
DEPLOYMENT = yaml.safe_load((ROOT / "deploy" / "kubernetes" / "deployment.yaml").read_text(encoding="utf-8"))
POD = DEPLOYMENT["spec"]["template"]["spec"]
[CONTAINER] = POD["containers"]


def _instructions() -> list[tuple[str, str]]:
    """The Containerfile's instructions of the final stage, continuation lines joined."""
    text = re.sub(r"\\\n", " ", CONTAINERFILE)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    final = max(i for i, ln in enumerate(lines) if ln.startswith("FROM "))
    return [(ln.split(None, 1)[0], ln.split(None, 1)[1]) for ln in lines[final:]]


def _containerfile() -> dict[str, object]:
    found: dict[str, object] = {"env": {}}
    for op, arg in _instructions():
        if op in {"ENTRYPOINT", "CMD"}:
            found[op.lower()] = json.loads(arg)
        elif op == "ENV":
            found["env"] = dict(kv.split("=", 1) for kv in shlex.split(arg))
        elif op in {"USER", "WORKDIR", "VOLUME", "EXPOSE", "HEALTHCHECK", "RUN"}:
            found[op.lower()] = arg
    return found


def _debian_build() -> dict[str, object]:
    """What `umoci config` in scripts/build_image.sh gives the image."""
    words = shlex.split(
        re.sub(r"\\\n", " ", BUILD.read_text(encoding="utf-8").split("umoci config", 1)[1].split("\n\n")[0])
    )
    found: dict[str, object] = {"cmd": [], "env": {}}
    for flag, value in zip(words, words[1:], strict=False):
        if flag == "--config.cmd":
            found["cmd"].append(value)  # type: ignore[attr-defined]
        elif flag == "--config.env":
            found["env"].update([value.split("=", 1)])  # type: ignore[attr-defined]
        elif flag.startswith("--config."):
            found[flag.removeprefix("--config.")] = value
    uid = re.search(r"^uid=(\d+)", BUILD.read_text(encoding="utf-8"), re.M)
    assert uid is not None
    found["uid"] = uid.group(1)
    return {k: v.replace("$uid", uid.group(1)) if isinstance(v, str) else v for k, v in found.items()}


def test_both_recipes_make_one_image_run_as_the_manifests_user_on_its_port() -> None:
    ours, debian = _containerfile(), _debian_build()
    uid = str(POD["securityContext"]["runAsUser"])
    assert ours["user"] == f"{uid}:{uid}" == debian["user"] and debian["uid"] == uid
    assert ours["entrypoint"] == [debian["entrypoint"]] == ["toolshell"]
    assert ours["cmd"] == debian["cmd"]
    assert ours["workdir"] == debian["workingdir"] == ours["env"]["TOOLSHELL_STATE_DIR"]  # type: ignore[index]
    assert ours["env"]["TOOLSHELL_STATE_DIR"] == debian["env"]["TOOLSHELL_STATE_DIR"]  # type: ignore[index]
    assert ours["volume"] == debian["volume"] == ours["workdir"]
    [port] = CONTAINER["ports"]
    assert ours["expose"] == debian["exposedports"] == f"{port['containerPort']}/tcp"
    # The image's command serves the port it exposes; the manifest's args replace it on the same port.
    params = serve.make_context("serve", list(ours["cmd"][1:])).params  # type: ignore[index]
    assert params["use_http"] and params["allow_remote"] and params["port"] == port["containerPort"]
    assert CONTAINER["args"][0] == ours["cmd"][0] == "serve"  # type: ignore[index]
    assert CONTAINER["image"].rsplit("/", 1)[-1].split(":")[0] == "toolshell"


def test_the_image_installs_the_extras_the_package_declares_and_checks_health_on_the_probe_path() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    for recipe in (CONTAINERFILE, BUILD.read_text(encoding="utf-8")):
        [named] = set(re.findall(r"\[(postgres,otel)\]", recipe))
        assert set(named.split(",")) <= set(extras)
    healthcheck = str(_containerfile()["healthcheck"])
    port = CONTAINER["ports"][0]["containerPort"]
    assert f"http://127.0.0.1:{port}{LIVE_PATH}" in healthcheck


@pytest.mark.skipif(os.environ.get("TOOLSHELL_IMAGE_TEST") != "1", reason="set TOOLSHELL_IMAGE_TEST=1 (root; 4-6 min)")
def test_the_debian_built_image_starts_and_answers_its_probes_as_the_non_root_user(tmp_path: Path) -> None:
    assert os.geteuid() == 0, "scripts/build_image.sh needs root (debootstrap, chroot)"
    out = tmp_path / "image"
    built = subprocess.run(["bash", str(BUILD), str(out)], capture_output=True, text=True, timeout=1200)
    assert built.returncode == 0, built.stderr[-4000:]
    assert (out / "toolshell" / "index.json").is_file()
    checked = subprocess.run(["bash", str(CHECK), str(out)], capture_output=True, text=True, timeout=600)
    assert checked.returncode == 0, checked.stderr[-4000:] + checked.stdout[-2000:]
    for line in (
        "GET /healthz: 200 ok",
        "GET /readyz: 200 ready",
        "POST /mcp without the token: 401",
        "the server runs as uid 10001",
        "SIGTERM stopped it",
    ):
        assert f"image_check: {line}" in checked.stdout
