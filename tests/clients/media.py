"""Test media made by Debian's ffmpeg (``/usr/bin/ffmpeg``, ``make system-deps``), and live
sources on loopback: an HLS folder served over HTTP, an RTMP server (``ffmpeg -listen 1``),
a UDP sender. The client under test reads them through PyAV's own FFmpeg, so the two
FFmpeg builds meet as an encoder and a player would."""

from __future__ import annotations

import functools
import http.server
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

FFMPEG = shutil.which("ffmpeg")
needs_ffmpeg = pytest.mark.skipif(FFMPEG is None,
                                  reason="Debian package 'ffmpeg' is not installed "
                                  "(make system-deps)")

# how each test format is encoded; "video" adds a picture track before the sound
FORMATS: dict[str, list[str]] = {
    "m4a": ["-c:a", "aac"],
    "opus": ["-c:a", "libopus"],
    "mp3": ["-c:a", "libmp3lame"],
    "flac": ["-c:a", "flac"],
    "ogg": ["-c:a", "libvorbis"],
    "mp4": ["video", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac"],
    "mkv": ["video", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "libopus"],
}


def ffmpeg(*args: str, timeout: float = 300) -> None:
    """Run Debian's ffmpeg quietly; its stderr in the failure if it fails."""
    proc = subprocess.run([FFMPEG or "ffmpeg", "-hide_banner", "-loglevel", "error", "-y",
                           *args], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]


def write_pcm_wav(path: Path, samples: np.ndarray, rate: int) -> Path:
    """A 16-bit WAV of ``samples`` (``(n,)`` or ``(n, channels)``, int16 scale)."""
    import wave

    x = np.clip(np.round(samples.reshape(len(samples), -1)), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(x.shape[1])
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(x.tobytes())
    return path


def encode(wav: Path, kind: str, out: Path | None = None) -> Path:
    """``wav`` encoded as ``kind`` (a key of FORMATS), next to it unless ``out`` is given."""
    out = out or wav.with_suffix("." + kind)
    codec = FORMATS[kind]
    if codec[0] == "video":  # a small moving picture as long as the sound
        ffmpeg("-f", "lavfi", "-i", "testsrc=size=96x64:rate=10", "-i", str(wav),
               "-map", "0:v", "-map", "1:a", "-shortest", *codec[1:], str(out))
    else:
        ffmpeg("-i", str(wav), *codec, str(out))
    return out


def listening(port: int) -> bool:
    """A TCP socket listens on 127.0.0.1:``port`` (read from /proc: connecting to find out
    would use up a one-client ``ffmpeg -listen 1``)."""
    want = f"0100007F:{port:04X}"  # 127.0.0.1:port as the kernel writes it; 0A: LISTEN
    rows = (line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:])
    return any(row[1] == want and row[3] == "0A" for row in rows)


def wait_for(ready, what: str, limit: float = 60) -> None:  # noqa: ANN001
    """Poll ``ready()`` until true; a bound against hanging, not a timing check."""
    deadline = time.monotonic() + limit
    while not ready():
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.05)


@contextmanager
def rtmp_server(source: Path, port: int) -> Iterator[subprocess.Popen]:
    """``ffmpeg -listen 1``: an RTMP server that plays ``source`` in real time to the one
    client that connects (as an encoder's or a media server's stream would), then ends."""
    proc = subprocess.Popen([FFMPEG or "ffmpeg", "-hide_banner", "-loglevel", "error", "-re",
                             "-i", str(source), "-vn", "-c:a", "aac", "-f", "flv", "-listen",
                             "1", f"rtmp://127.0.0.1:{port}/live/talk"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: listening(port) or proc.poll() is not None, "the RTMP listener")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


@contextmanager
def served_folder(folder: Path) -> Iterator[str]:
    """``folder`` over HTTP on loopback (a CDN's or a room's stream server); its URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:  # no request log in the test output
        pass


@contextmanager
def hls_live(source: Path, folder: Path) -> Iterator[subprocess.Popen]:
    """ffmpeg publishing ``source`` in real time as a live HLS stream (1 s segments, the
    playlist growing until ``#EXT-X-ENDLIST``) into ``folder``; yields once the playlist
    exists, as a viewer would find it."""
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([FFMPEG or "ffmpeg", "-hide_banner", "-loglevel", "error", "-re",
                             "-i", str(source), "-vn", "-c:a", "aac", "-f", "hls",
                             "-hls_time", "1", "-hls_list_size", "0",
                             str(folder / "live.m3u8")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: (folder / "live.m3u8").exists() or proc.poll() is not None,
                 "the HLS playlist")
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def udp_send(source: Path, url: str, loop: bool = False) -> subprocess.Popen:
    """ffmpeg sending ``source`` in real time as MPEG-TS over UDP (a sender that does not
    care whether anyone listens, as a hardware encoder's would); ``loop``: forever."""
    again = ["-stream_loop", "-1"] if loop else []
    return subprocess.Popen([FFMPEG or "ffmpeg", "-hide_banner", "-loglevel", "error", "-re",
                             *again, "-i", str(source), "-vn", "-c:a", "aac", "-f", "mpegts",
                             url],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
