"""Real nginx and HAProxy in front of real workers, run with the configurations docs/scale-out.md
prints: each is copied out of the doc, and only its addresses, ports and certificate paths are
replaced (each replacement must find its text, so a doc that changes shape fails here)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from _ci_support import skip_or_fail
from _net_support import free_port
from _serve_auth_support import wait_for_port

DOC = Path(__file__).resolve().parent.parent / "docs" / "scale-out.md"
DOC_WORKERS = ["10.0.1.1:8765", "10.0.1.2:8765", "10.0.1.3:8765"]
"""The worker addresses the doc's configurations name."""
PROXIES = ["nginx", "haproxy"]


def doc_config(name: str) -> str:
    """The body of the doc's ```` ```text proxy=<name> ```` block."""
    found = re.findall(rf"^```text proxy={name}\n(.*?)^```$", DOC.read_text(encoding="utf-8"), re.M | re.S)
    assert len(found) == 1, f"docs/scale-out.md should print one {name} configuration, not {len(found)}"
    return str(found[0])


def replaced(text: str, replacements: dict[str, str]) -> str:
    for old, new in replacements.items():
        assert old in text, f"the documented configuration no longer contains {old!r}"
        text = text.replace(old, new)
    return text


@dataclass
class Proxy:
    name: str
    url: str
    """The `/mcp` URL clients use (https, a self-signed certificate for mcp.example.com)."""
    log: Path


def require(binary: str) -> str:
    """The binary's path; a skip with the install step where it is missing (a failure under CI)."""
    found = shutil.which(binary) or (f"/usr/sbin/{binary}" if os.path.exists(f"/usr/sbin/{binary}") else None)
    if found is None:
        message = f"{binary} is not installed: apt-get install -y nginx haproxy (.ci/run does)"
        skip_or_fail(message)
    return found


def certificate(directory: Path) -> tuple[Path, Path, Path]:
    """A self-signed certificate for mcp.example.com and 127.0.0.1: (cert, key, the two in one PEM)."""
    cert, key, pem = directory / "mcp.crt", directory / "mcp.key", directory / "mcp.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=mcp.example.com"]
        + ["-addext", "subjectAltName=DNS:mcp.example.com,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    pem.write_text(cert.read_text() + key.read_text())
    return cert, key, pem


@contextmanager
def proxy(name: str, workers: list[int], directory: Path) -> Iterator[Proxy]:
    """The doc's `name` configuration in front of the workers on these ports, on a free port."""
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    cert, key, pem = certificate(directory)
    addresses = {doc: f"127.0.0.1:{p}" for doc, p in zip(DOC_WORKERS, workers, strict=False)}
    log = directory / "proxy.log"
    if name == "nginx":
        body = replaced(
            doc_config("nginx"),
            {
                "listen 443 ssl;": f"listen 127.0.0.1:{port} ssl;",
                "/etc/ssl/mcp.example.com.crt": str(cert),
                "/etc/ssl/mcp.example.com.key": str(key),
                **addresses,
            },
        )
        argv = _nginx(require("nginx"), body, directory, log)
    else:
        body = replaced(
            doc_config("haproxy"),
            {"bind :443 ssl crt /etc/haproxy/certs/mcp.example.com.pem": f"bind 127.0.0.1:{port} ssl crt {pem}"}
            | addresses,
        )
        (directory / "haproxy.cfg").write_text(body)
        argv = [require("haproxy"), "-db", "-f", str(directory / "haproxy.cfg")]
    with log.open("w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port)
        yield Proxy(name, f"https://127.0.0.1:{port}/mcp", log)
    finally:
        proc.terminate()
        proc.wait(20)


def _nginx(binary: str, body: str, directory: Path, log: Path) -> list[str]:
    """nginx in the foreground, with the doc's block as the whole `http` context."""
    kinds = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    temp = "".join(f"{kind}_temp_path {directory / kind};\n" for kind in kinds)
    conf = directory / "nginx.conf"
    conf.write_text(
        f"user root;\nworker_processes 1;\npid {directory / 'nginx.pid'};\nerror_log {log} warn;\n"
        f"events {{}}\nhttp {{\naccess_log off;\n{temp}{body}\n}}\n"
    )
    return [binary, "-p", str(directory), "-e", str(log), "-c", str(conf), "-g", "daemon off;"]
