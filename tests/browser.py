"""Headless Chromium for the tests (Debian's ``chromium``, driven by Playwright): where it
is and how it is started, in one place."""

from __future__ import annotations

import shutil
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
QUIET = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--autoplay-policy=no-user-gesture-required"]


def chromium_args(microphone: Path | None = None, webrtc: bool = False) -> list[str]:
    """Chromium's flags: quiet, headless-safe, media plays without a gesture; with
    ``microphone``, a fake capture
    device playing that WAV (in a loop) and no permission prompt; with ``webrtc``, host
    ICE candidates as addresses rather than mDNS names, so a loopback peer reaches it."""
    args = list(QUIET)
    if microphone is not None:
        args += ["--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
                 f"--use-file-for-fake-audio-capture={microphone}"]
    if webrtc:
        args.append("--disable-features=WebRtcHideLocalIpsWithMdns")
    return args
