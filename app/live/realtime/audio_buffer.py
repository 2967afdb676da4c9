"""The client's audio as the protocol frames it: base64 24 kHz PCM16 mono, cut into
200 ms frames.

A shorter append waits here until a frame is whole; a longer one is split into frames
sent back-to-back. Frames go to the live connection at 24 kHz as they are: its audio
input resamples them to the recogniser's 16 kHz (``app.speech.resample``). What is held
here is under one frame, so the buffer is bounded by construction; the append itself is
bounded by the event's size (``client_events.MAX_EVENT_CHARS``).
"""

from __future__ import annotations

import base64
import binascii

from app.live.realtime.client_events import ClientEventError

SAMPLE_RATE = 24_000  # the WebSocket transport's only input rate
FRAME_BYTES = SAMPLE_RATE * 2 // 5  # 200 ms of PCM16 mono: 9600 bytes


def decode_audio(audio: str, event_id: str | None = None) -> bytes:
    """The PCM of an append's ``audio``, or ``ClientEventError`` (not base64, or not whole
    16-bit samples)."""
    try:
        pcm = base64.b64decode(audio, validate=True)
    except (binascii.Error, ValueError):
        raise ClientEventError("invalid_audio", "'audio' is not valid base64 (24 kHz "
                               "PCM16 mono, base64-encoded)", "audio", event_id) from None
    if len(pcm) % 2:
        raise ClientEventError("invalid_audio", f"'audio' decodes to {len(pcm)} bytes: "
                               "PCM16 samples come in whole pairs of bytes", "audio",
                               event_id)
    return pcm


class FrameBuffer:
    """Appends in, whole 200 ms frames out; under one frame held between appends."""

    def __init__(self) -> None:
        self.pending = b""
        self.frames = 0  # frames handed out so far: the session's audio clock

    @property
    def elapsed_ms(self) -> int:
        """The audio received, in whole 200 ms frames (``elapsed_ms`` of deltas)."""
        return self.frames * 200

    def add(self, pcm: bytes) -> list[bytes]:
        data = self.pending + pcm
        whole = len(data) - len(data) % FRAME_BYTES
        frames = [data[i:i + FRAME_BYTES] for i in range(0, whole, FRAME_BYTES)]
        self.pending = data[whole:]
        self.frames += len(frames)
        return frames

    def rest(self) -> bytes:
        """What is left at the end (under one frame), to be recognised too."""
        rest, self.pending = self.pending, b""
        return rest
