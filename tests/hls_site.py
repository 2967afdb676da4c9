"""An organiser's site on loopback for the HLS player tests: a folder served over HTTP
(the page, hls.js, a test video and the master playlist), and the test video ffmpeg
makes."""

from __future__ import annotations

import functools
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

# hls.js as ``make web-deps`` installs it, found from this file (a test's own depth moves)
HLS_JS = Path(__file__).resolve().parent / "web" / "node_modules" / "hls.js" / "dist" / \
    "hls.min.js"


@contextmanager
def served_folder(root: Path, port: int) -> Iterator[None]:
    """``root`` served at http://127.0.0.1:``port``/ until the block ends."""

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port),
                                 functools.partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def hls_js_site(root: Path, page: str, port: int) -> Iterator[Path]:
    """The organiser's site in ``root`` (``page`` as index.html, beside hls.js) served on
    ``port`` until the block ends; the test is skipped when hls.js is not installed."""
    if not HLS_JS.exists():
        pytest.skip("hls.js missing (make web-deps installs it)")
    root.mkdir()
    shutil.copy(HLS_JS, root / "hls.min.js")
    (root / "index.html").write_text(page, encoding="utf-8")
    with served_folder(root, port):
        yield root


def make_test_video(ffmpeg: str, folder: Path, seconds: float, timeout_s: float) -> None:
    """A test video as VOD HLS in ``folder`` (``video.m3u8``: MPEG-TS, H.264, no B-frames,
    no sound; its clock starts at the muxer's 1.4 s, as ffmpeg-made streams do)."""
    subprocess.run([ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-y",
                    "-f", "lavfi", "-i", f"testsrc=size=160x120:rate=10:duration={seconds:.0f}",
                    "-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "0", "-g", "10",
                    "-f", "hls", "-hls_time", "2", "-hls_playlist_type", "vod",
                    "-hls_segment_filename", str(folder / "v%d.ts"),
                    str(folder / "video.m3u8")], check=True, timeout=timeout_s)
