"""24 kHz PCM16 appends cut into 200 ms frames: shorter buffered, longer split."""

from __future__ import annotations

import base64

import pytest

from app.live.realtime.audio_buffer import FRAME_BYTES, FrameBuffer, decode_audio
from app.live.realtime.client_events import ClientEventError


def test_a_frame_is_200_ms_of_24_khz_pcm16() -> None:
    assert FRAME_BYTES == 24_000 * 2 // 5


def test_short_appends_wait_and_long_ones_are_split() -> None:
    buf = FrameBuffer()
    assert buf.add(b"\x01\x00" * 100) == []
    frames = buf.add(bytes(FRAME_BYTES * 2))
    assert [len(f) for f in frames] == [FRAME_BYTES, FRAME_BYTES]
    assert frames[0][:2] == b"\x01\x00"  # the buffered samples come first, in order
    assert buf.elapsed_ms == 400
    assert len(buf.rest()) == 200 and buf.rest() == b""


def test_audio_that_is_not_base64_or_not_whole_samples_is_refused() -> None:
    assert decode_audio(base64.b64encode(b"\x00\x01").decode()) == b"\x00\x01"
    for bad in ("not base64!", "QUJD\n", "=="):
        with pytest.raises(ClientEventError) as err:
            decode_audio(bad, "ev")
        assert err.value.code == "invalid_audio" and err.value.event_id == "ev"
    with pytest.raises(ClientEventError) as err:
        decode_audio(base64.b64encode(b"\x00\x01\x02").decode())
    assert "whole pairs" in err.value.message
