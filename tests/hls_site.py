"""An organiser's site on loopback for the HLS player tests: a folder served over HTTP
(the page, hls.js, a test video and the master playlist), and the test video ffmpeg
makes."""

from __future__ import annotations

import functools
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


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


def make_test_video(ffmpeg: str, folder: Path, seconds: float, timeout_s: float) -> None:
    """A test video as VOD HLS in ``folder`` (``video.m3u8``: MPEG-TS, H.264, no B-frames,
    no sound; its clock starts at the muxer's 1.4 s, as ffmpeg-made streams do)."""
    subprocess.run([ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-y",
                    "-f", "lavfi", "-i", f"testsrc=size=160x120:rate=10:duration={seconds:.0f}",
                    "-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "0", "-g", "10",
                    "-f", "hls", "-hls_time", "2", "-hls_playlist_type", "vod",
                    "-hls_segment_filename", str(folder / "v%d.ts"),
                    str(folder / "video.m3u8")], check=True, timeout=timeout_s)
