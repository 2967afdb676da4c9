"""Two replicas behind nginx (Debian package) on loopback, with ``docker/nginx.conf``'s
affinity rule: every update of a session lands on one replica, and a replica's death costs
only draft reuse, not correctness."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
REPO = Path(__file__).resolve().parents[2]


def _wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "process exited"
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(url)


def _nginx_conf(tmp: Path, port: int, upstreams: list[int]) -> Path:
    """The shipped config with loopback addresses and a private prefix."""
    conf = (REPO / "docker" / "nginx.conf").read_text()
    servers = "\n".join(f"    server 127.0.0.1:{p} max_fails=1 fail_timeout=30s;"
                        for p in upstreams)
    conf = re.sub(r"(    server livetrans-[ab]:8000[^\n]*\n)+", servers + "\n", conf)
    conf = conf.replace("listen 8000;", f"listen 127.0.0.1:{port};")
    conf = conf.replace("worker_processes auto;", "worker_processes 1;\n"
                        f"pid {tmp}/nginx.pid;\nerror_log {tmp}/error.log;\ndaemon off;")
    conf = conf.replace("http {", f"http {{\n  access_log {tmp}/access.log;\n"
                        f"  client_body_temp_path {tmp};\n  proxy_temp_path {tmp};")
    path = tmp / "nginx.conf"
    path.write_text(conf)
    return path


@pytest.mark.skipif(NGINX is None, reason="Debian package 'nginx' is not installed")
def test_sessions_stick_to_one_replica_and_survive_its_death(tmp_path) -> None:
    ports = [free_port(), free_port()]
    replicas = {
        p: subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(p),
                             "--replica-id", f"r{p}", "--log-level", "warning"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for p in ports
    }
    gw_port = free_port()
    nginx = None
    try:
        for p, proc in replicas.items():
            _wait_healthy(f"http://127.0.0.1:{p}/health", proc)
        conf = _nginx_conf(tmp_path, gw_port, ports)
        nginx = subprocess.Popen([NGINX, "-c", str(conf), "-p", str(tmp_path)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        gw = f"http://127.0.0.1:{gw_port}"
        _wait_healthy(gw + "/health", nginx)

        def update(sid: str, text: str) -> httpx.Response:
            return httpx.post(gw + "/v1/chat/completions", timeout=120,
                              headers={"X-Session-ID": sid},
                              json={"model": "default", "target_lang": "de",
                                    "messages": [{"role": "user", "content": text}]})

        words = "the new station will open next year after long delays".split()
        where: dict[str, set[str]] = {}
        for s in range(8):
            sid = f"sess-{s}"
            for n in (3, 6, len(words)):
                r = update(sid, " ".join(words[:n]))
                assert r.status_code == 200
                where.setdefault(sid, set()).add(r.headers["x-livetrans-replica"])
                assert r.json()["livetrans"]["revision"] == {3: 1, 6: 2}.get(n, 3)
        assert all(len(v) == 1 for v in where.values())
        assert len({next(iter(v)) for v in where.values()}) == 2  # both replicas used

        # Kill the replica holding sess-0; its next update is served by the other one from
        # an empty draft (revision 1, nothing drafted): plain re-translation, still correct.
        victim = int(next(iter(where["sess-0"]))[1:])
        replicas[victim].send_signal(signal.SIGKILL)
        replicas[victim].wait(10)
        r = update("sess-0", " ".join(words))
        assert r.status_code == 200
        assert r.headers["x-livetrans-replica"] != f"r{victim}"
        info = r.json()["livetrans"]
        assert info["revision"] == 1 and info["ssbd_draft_tokens"] == 0  # no draft survived
        assert r.json()["choices"][0]["message"]["content"].strip()
        # and the session lives on there: the next update uses the new draft
        r = update("sess-0", " ".join(words) + " again")
        assert r.json()["livetrans"]["revision"] == 2
    finally:
        if nginx is not None:
            nginx.terminate()
            nginx.wait(10)
        for proc in replicas.values():
            if proc.poll() is None:
                proc.terminate()
                proc.wait(30)
