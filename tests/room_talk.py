"""A speaker's text talk in a room over ``/v1/live``, for the room voice tests: German
sentences (partials, then each final), append-only text and the room's voices; returns
``ready`` and the final captions with the monotonic time each arrived."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence

GERMAN = ["Der Ausschuss wird seinen Bericht im nächsten Frühjahr veröffentlichen.",
          "Vielen Dank, dass Sie heute alle zu diesem Vortrag gekommen sind."]
LIMIT_S = 300


def text_talk(base_url: str, api_key: str, room: str, *, voices: Sequence[str] = ("en",),
              sentences: Sequence[str] = GERMAN, on_ready: Callable[[dict], None] | None = None,
              pause_s: float = 1.0) -> tuple[dict, list[dict]]:
    """The talk, to its ``done``: (``ready``, final captions, each with ``"_at"``)."""
    from websockets.sync.client import connect

    url = base_url.replace("http://", "ws://") + "/v1/live"
    finals: list[dict] = []
    with connect(url, additional_headers={"Authorization": f"Bearer {api_key}"},
                 open_timeout=60, max_size=None) as ws:
        ws.send(json.dumps({"type": "start", "room": room, "source_lang": "de",
                            "target_langs": list(voices), "display": "append",
                            "voices": list(voices)}))
        ready = json.loads(ws.recv(timeout=60))
        assert ready["type"] == "ready", ready
        assert [v["lang"] for v in ready["voices"]] == list(voices), ready
        if on_ready is not None:
            on_ready(ready)
        for segment, text in enumerate(sentences):
            words = text.split()
            for n in (3, 6):
                ws.send(json.dumps({"type": "partial", "segment": segment,
                                    "text": " ".join(words[:n])}))
                time.sleep(0.5)
            ws.send(json.dumps({"type": "final", "segment": segment, "text": text}))
            time.sleep(pause_s)
        ws.send(json.dumps({"type": "stop"}))
        while True:
            msg = ws.recv(timeout=LIMIT_S)
            if isinstance(msg, bytes):
                continue  # the speaker's own copy of the voice
            frame = json.loads(msg)
            assert frame["type"] != "error", frame
            if frame["type"] == "done":
                return ready, finals
            if frame["type"] == "caption" and frame["final"]:
                finals.append({**frame, "_at": time.monotonic()})
