"""Two replicas behind nginx (Debian package) on loopback, with ``docker/nginx.conf``'s
affinity rule: every update of a session lands on one replica, whether the client names the
session in the ``X-Session-ID`` header or in the JSON body's ``session_id``, and a replica's
death costs only draft reuse, not correctness. A WHIP publisher's offer and its ``DELETE``
reach the same replica (routed on the room), as compose runs them.

The routing rules themselves are checked against two stub upstreams (fast, no model); the
end to end tests run two real replicas."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port
from tests.redis_server import redis_server
from tests.whip_offers import Transport, obs_offer, without_section

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


class _Stub(BaseHTTPRequestHandler):
    """An upstream that answers with its name and the routing headers it received."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.dumps({
            "replica": self.server.name,  # type: ignore[attr-defined]
            "gateway": self.headers.get("x-livetrans-gateway"),
            "routed": self.headers.get("x-livetrans-routed-session"),
        }).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_DELETE = do_POST

    def log_message(self, *args) -> None:
        pass


@contextmanager
def _gateway(tmp: Path, n_stubs: int = 2) -> Iterator[str]:
    """nginx with the shipped config in front of ``n_stubs`` stub upstreams."""
    stubs = []
    for i in range(n_stubs):
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
        server.name = f"stub-{i}"  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        stubs.append(server)
    gw_port = free_port()
    conf = _nginx_conf(tmp, gw_port, [s.server_address[1] for s in stubs])
    nginx = subprocess.Popen([NGINX, "-c", str(conf), "-p", str(tmp)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        gw = f"http://127.0.0.1:{gw_port}"
        _wait_healthy(gw + "/health", nginx, timeout=20)
        yield gw
    finally:
        nginx.terminate()
        nginx.wait(10)
        for server in stubs:
            server.shutdown()


@pytest.mark.skipif(NGINX is None, reason="Debian package 'nginx' is not installed")
def test_gateway_routes_a_session_the_same_way_by_header_or_by_body(tmp_path) -> None:
    with _gateway(tmp_path) as gw, httpx.Client(base_url=gw, timeout=10) as client:
        def post(headers: dict | None = None, **body) -> dict:
            r = client.post("/v1/chat/completions", headers=headers or {},
                            json={"model": "default", "messages": [
                                {"role": "user", "content": "Hello"}], **body})
            assert r.status_code == 200
            return r.json()

        by_header = {f"s-{i}": post({"X-Session-ID": f"s-{i}"}) for i in range(24)}
        assert len({r["replica"] for r in by_header.values()}) == 2  # both replicas used
        for sid, first in by_header.items():
            assert first["gateway"] == "nginx" and first["routed"] == sid
            for _ in range(2):
                assert post({"X-Session-ID": sid})["replica"] == first["replica"]
                body = post(session_id=sid, target_lang="de")  # the SDK's extra_body
                assert body["replica"] == first["replica"] and body["routed"] == sid
        # the id anywhere in the body, in any JSON spacing, after a large message
        raw = ('{"messages": [{"role": "user", "content": "' + "x" * 200_000 + '"}],'
               '\n "session_id" :\t"s-3", "model": "default"}')
        r = client.post("/v1/chat/completions", content=raw,
                        headers={"content-type": "application/json"}).json()
        assert r["replica"] == by_header["s-3"]["replica"] and r["routed"] == "s-3"
        # a client cannot forge what the gateway routed on
        forged = post({"X-Livetrans-Routed-Session": "other"}, session_id="s-5")
        assert forged["routed"] == "s-5"
        # an id the pattern cannot read is not routed on, and the replica is told so
        escaped = client.post("/v1/chat/completions", content='{"session_id": "s\\u002d5"}',
                              headers={"content-type": "application/json"}).json()
        assert escaped["gateway"] == "nginx" and escaped["routed"] is None


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
            """Sessions 0-7 are named in the header, 8-11 in the body (the SDK's extra_body)."""
            in_body = int(sid.rsplit("-", 1)[1]) >= 8
            return httpx.post(gw + "/v1/chat/completions", timeout=120,
                              headers={} if in_body else {"X-Session-ID": sid},
                              json={"model": "default", "target_lang": "de",
                                    **({"session_id": sid} if in_body else {}),
                                    "messages": [{"role": "user", "content": text}]})

        words = "the new station will open next year after long delays".split()
        where: dict[str, set[str]] = {}
        for s in range(12):
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


@pytest.mark.skipif(NGINX is None, reason="Debian package 'nginx' is not installed")
def test_gateway_routes_a_whip_offer_and_its_delete_by_room(tmp_path) -> None:
    with _gateway(tmp_path) as gw, httpx.Client(base_url=gw, timeout=10) as client:
        where = {}
        for i in range(24):
            room = f"stage-{i}"
            r = client.post(f"/v1/rooms/{room}/whip?target_langs=de", content="v=0\r\n",
                            headers={"content-type": "application/sdp"})
            assert r.status_code == 200
            where[room] = r.json()["replica"]
            for resource in ("Xy_z-0", "other"):
                deleted = client.delete(f"/v1/rooms/{room}/whip/{resource}")
                assert deleted.json()["replica"] == where[room], room
        assert len(set(where.values())) == 2  # rooms spread over both replicas
        # the rest of /v1/rooms/ needs no affinity: it still goes to either replica
        seen = {client.get("/v1/rooms/stage-0/transcript").json()["replica"]
                for _ in range(6)}
        assert len(seen) == 2


def _replica(port: int, redis_url: str, udp: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--replica-id",
         f"r{port}", "--log-level", "warning", "--room-bus", redis_url,
         "--whip-udp-ports", udp],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.skipif(NGINX is None, reason="Debian package 'nginx' is not installed")
def test_a_whip_publisher_and_its_delete_through_the_gateway_to_two_replicas(
        tmp_path) -> None:
    """compose's stack on loopback: Redis, two replicas each with its own UDP range, nginx
    with the shipped config; an aiortc publisher (with its own offer, or in OBS's layout
    with AV1 video) connects through it and ends with DELETE."""
    pytest.importorskip("aiortc", reason="aiortc (livetrans[speech]) is not installed")
    import asyncio

    from aiortc import RTCPeerConnection, RTCSessionDescription

    from app.live.whip.sdp import host_candidate_ports

    ranges = {free_port(): "50000-50019", free_port(): "50020-50039"}
    with redis_server(tmp_path / "redis") as redis:
        replicas = {p: _replica(p, redis.url, udp) for p, udp in ranges.items()}
        gw_port = free_port()
        nginx = None
        try:
            for p, proc in replicas.items():
                _wait_healthy(f"http://127.0.0.1:{p}/health", proc)
            conf = _nginx_conf(tmp_path, gw_port, list(ranges))
            nginx = subprocess.Popen([NGINX, "-c", str(conf), "-p", str(tmp_path)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            gw = f"http://127.0.0.1:{gw_port}"
            _wait_healthy(gw + "/health", nginx)

            async def publish(room: str, as_obs: bool) -> tuple[str, list[int], int, int]:
                """aiortc's own offer, or its transport in OBS's layout with AV1 video."""
                pc = RTCPeerConnection()
                pc.addTransceiver("audio", direction="sendonly")
                await pc.setLocalDescription(await pc.createOffer())
                offer = pc.localDescription.sdp
                if as_obs:
                    offer = obs_offer("av1", Transport.of(offer))
                connected = asyncio.Event()

                @pc.on("connectionstatechange")
                def on_state() -> None:
                    if pc.connectionState == "connected":
                        connected.set()

                async with httpx.AsyncClient(base_url=gw, timeout=300) as client:
                    r = await client.post(f"/v1/rooms/{room}/whip?target_langs=de",
                                          content=offer,
                                          headers={"content-type": "application/sdp"})
                    assert r.status_code == 201, r.text
                    answer = without_section(r.text, "1") if as_obs else r.text
                    await pc.setRemoteDescription(
                        RTCSessionDescription(sdp=answer, type="answer"))
                    await asyncio.wait_for(connected.wait(), 300)
                    deleted = await client.delete(r.headers["location"])
                    again = await client.delete(r.headers["location"])
                await pc.close()
                return (r.headers["x-livetrans-replica"], host_candidate_ports(r.text),
                        deleted.status_code, again.status_code)

            for i in range(4):
                replica, ports, deleted, again = asyncio.run(publish(f"hall-{i}", i % 2 == 1))
                low, high = (int(x) for x in ranges[int(replica[1:])].split("-"))
                assert ports and all(low <= p <= high for p in ports), (replica, ports)
                assert deleted == 200 and again == 404  # the DELETE found its session
        finally:
            if nginx is not None:
                nginx.terminate()
                nginx.wait(10)
            for proc in replicas.values():
                if proc.poll() is None:
                    proc.terminate()
                    proc.wait(30)
