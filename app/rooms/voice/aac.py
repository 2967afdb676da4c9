"""Speech as AAC-LC in ADTS frames: HLS "packed audio" (RFC 8216 3.4), which hls.js,
Safari and ffmpeg play without a container.

One ``AacStream`` per room voice encodes the whole talk with one encoder, so the audio is
continuous across segments (an encoder started per segment would put its priming silence
and a discontinuity at every boundary). What it returns for each stretch of PCM are the
AAC frames the encoder had ready, each with its presentation time (seconds on the
stream's clock; the first frame's is negative by the encoder's priming delay), so a
segment knows the time of its first frame for its ID3 timestamp (``playlist.id3_timestamp``).
"""

from __future__ import annotations

import fractions
from dataclasses import dataclass

import av
import numpy as np

RATE = 24_000  # the room voice's sample rate (every voice is resampled to it)
BIT_RATE = 32_000  # speech, mono: about 4 kB a second
FRAME_SAMPLES = 1024  # AAC-LC's frame
_SAMPLING_INDEX = {96000: 0, 88200: 1, 64000: 2, 48000: 3, 44100: 4, 32000: 5, 24000: 6,
                   22050: 7, 16000: 8, 12000: 9, 11025: 10, 8000: 11}


def adts_header(payload: int, rate: int = RATE, channels: int = 1) -> bytes:
    """The 7-byte ADTS header (MPEG-4 AAC-LC, no CRC) of a raw AAC frame of ``payload``
    bytes (ISO/IEC 13818-7, 6.2)."""
    length = payload + 7
    profile = 1  # AAC-LC: audio object type 2, minus one
    index = _SAMPLING_INDEX[rate]
    return bytes([
        0xFF, 0xF1,  # sync word, MPEG-4, layer 0, protection absent
        (profile << 6) | (index << 2) | (channels >> 2),
        ((channels & 3) << 6) | (length >> 11),
        (length >> 3) & 0xFF,
        ((length & 7) << 5) | 0x1F,  # buffer fullness 0x7FF (variable rate)...
        0xFC,  # ... and one raw data block
    ])


@dataclass(frozen=True)
class AacFrame:
    """One ADTS frame and its presentation time (seconds on the stream's clock)."""

    data: bytes
    pts_s: float


class AacStream:
    """A persistent AAC-LC encoder: PCM16 mono at ``RATE`` in, ADTS frames out."""

    def __init__(self, bit_rate: int = BIT_RATE) -> None:
        self.codec = av.CodecContext.create("aac", "w")
        self.codec.sample_rate = RATE
        self.codec.layout = "mono"
        self.codec.format = "fltp"
        self.codec.bit_rate = bit_rate
        self.codec.time_base = fractions.Fraction(1, RATE)
        self.codec.open()
        self.pending = np.zeros(0, dtype=np.float32)
        self.samples = 0  # fed to the encoder so far: the next frame's pts

    def encode(self, pcm: bytes) -> list[AacFrame]:
        """Encode ``pcm`` (PCM16 mono at ``RATE``); the frames the encoder has ready (it
        holds back a few until later input or ``flush``)."""
        samples = np.frombuffer(pcm[: len(pcm) - len(pcm) % 2], dtype="<i2")
        self.pending = np.concatenate([self.pending, samples.astype(np.float32) / 32768.0])
        out: list[AacFrame] = []
        while len(self.pending) >= FRAME_SAMPLES:
            out += self._feed(self.pending[:FRAME_SAMPLES])
            self.pending = self.pending[FRAME_SAMPLES:]
        return out

    def flush(self) -> list[AacFrame]:
        """The rest: what is pending (padded with silence to a frame) and what the
        encoder held back."""
        out: list[AacFrame] = []
        if len(self.pending):
            padded = np.zeros(FRAME_SAMPLES, dtype=np.float32)
            padded[: len(self.pending)] = self.pending
            self.pending = np.zeros(0, dtype=np.float32)
            out += self._feed(padded)
        return out + self._frames(self.codec.encode(None))

    def _feed(self, block: np.ndarray) -> list[AacFrame]:
        frame = av.AudioFrame.from_ndarray(block.reshape(1, -1), format="fltp", layout="mono")
        frame.sample_rate = RATE
        frame.pts = self.samples
        frame.time_base = fractions.Fraction(1, RATE)
        self.samples += len(block)
        return self._frames(self.codec.encode(frame))

    def _frames(self, packets: list[av.Packet]) -> list[AacFrame]:
        return [AacFrame(adts_header(p.size) + bytes(p), (p.pts or 0) / RATE)
                for p in packets]


def adts_frames(data: bytes) -> list[bytes]:
    """``data`` split into its ADTS frames (a trailing partial frame, or bytes without a
    sync word, end the split: a piece holds whole frames)."""
    frames: list[bytes] = []
    at = 0
    while at + 7 <= len(data) and data[at] == 0xFF and data[at + 1] & 0xF0 == 0xF0:
        length = ((data[at + 3] & 3) << 11) | (data[at + 4] << 3) | (data[at + 5] >> 5)
        if length < 7 or at + length > len(data):
            break
        frames.append(data[at:at + length])
        at += length
    return frames


class AacDecoder:
    """ADTS frames in, PCM16 mono at ``RATE`` out: a listener's side of ``AacStream``.
    Frame by frame (no parser holding one back), so a piece is heard as soon as it came."""

    def __init__(self) -> None:
        self.codec = av.CodecContext.create("aac", "r")

    def decode(self, data: bytes) -> bytes:
        out: list[np.ndarray] = []
        for frame in adts_frames(data):
            try:
                decoded = self.codec.decode(av.Packet(frame))
            except av.error.FFmpegError:  # a damaged frame: skipped, the next one decodes
                continue
            out += [f.to_ndarray().reshape(-1) for f in decoded]
        if not out:
            return b""
        samples = np.clip(np.concatenate(out) * 32768.0, -32768, 32767)
        return samples.astype("<i2").tobytes()
