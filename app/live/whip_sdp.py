"""The old path of ``app.live.whip.sdp``, kept for ``app.live.realtime.webrtc``, whose
owner moves its import; nothing else may use it (delete this module then)."""

from __future__ import annotations

from app.live.whip.sdp import Description

__all__ = ["Description"]
