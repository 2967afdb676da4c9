"""PCM16 from what engines hand back: float arrays (ONNX voices) and WAV streams
(espeak-ng's ``--stdout``, whose header carries no real length)."""

from __future__ import annotations

import struct

import numpy as np

from app.voice.base import SynthesisError


def float_to_pcm16(audio: np.ndarray) -> bytes:
    """Float samples in [-1, 1] as little-endian PCM16 (clipped, never wrapped)."""
    samples = np.clip(np.asarray(audio, dtype=np.float32).ravel(), -1.0, 1.0)
    return (samples * 32767.0).astype("<i2").tobytes()


def wav_pcm16(data: bytes) -> tuple[bytes, int]:
    """(PCM16 mono samples, sample rate) of a RIFF/WAVE stream. The ``data`` chunk runs to
    the end of the stream: a writer to a pipe cannot seek back to write its size, so
    espeak-ng's size fields are placeholders and are ignored."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise SynthesisError("the engine returned no WAV audio")
    pos, rate = 12, 0
    while pos + 8 <= len(data):
        chunk, size = data[pos:pos + 4], struct.unpack("<I", data[pos + 4:pos + 8])[0]
        body = pos + 8
        if chunk == b"fmt ":
            fmt, channels, rate = struct.unpack("<HHI", data[body:body + 8])
            bits = struct.unpack("<H", data[body + 14:body + 16])[0]
            if fmt != 1 or channels != 1 or bits != 16:
                raise SynthesisError("the engine's WAV is not PCM16 mono")
        elif chunk == b"data":
            if not rate:
                raise SynthesisError("the engine's WAV has no format before its data")
            pcm = data[body:]
            return pcm[:len(pcm) - len(pcm) % 2], rate
        pos = body + size + (size & 1)
    raise SynthesisError("the engine's WAV has no audio data")
