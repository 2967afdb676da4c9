"""Speech in for ``livetrans caption --audio``: a WAV, any other file or live URL FFmpeg reads
(``clients.audio_source``), or raw PCM, to 16 kHz chunks, and the embedded PocketSphinx
recogniser (``--asr pocketsphinx``).

    livetrans caption --audio talk.wav --target-lang de        # a WAV file
    livetrans caption --audio talk.m4a --realtime              # any container, paced
    livetrans caption --audio rtmp://encoder/live/room1        # a live source
    arecord -q -r 16000 -f S16_LE -c 1 | livetrans caption --audio -   # raw PCM on stdin

By default the server recognises the speech (its Whisper, API.md "Speech in"): the client
only sends the chunks. With ``--asr pocketsphinx`` it recognises them itself, for a server
without speech input: PocketSphinx installs from PyPI with its US English model inside the
wheel (``pip install 'livetrans[audio]'``). Its words are rough next to Whisper (``livetrans
speech-bench`` measures both); any other recogniser can
still feed JSON lines to ``livetrans caption --stdin``. This module yields exactly those
updates (``{"type": "partial"|"final", "segment": n, "text": ...}``), so the caption client
treats both sources alike.

The pipeline: any PCM or float WAV (or raw 16 kHz s16le mono on stdin) is read in 100 ms
chunks, downmixed and resampled to 16 kHz mono (any other file or a URL is decoded and
resampled by PyAV's FFmpeg instead), optionally paced to real time (a file replays as if
someone were speaking), cut into utterances by PocketSphinx's voice-activity
endpointer, and decoded incrementally: a partial whenever the hypothesis changes, one final
per utterance. Decoding is synchronous and CPU-bound; the caption client runs the
generator on a worker thread.
"""

from __future__ import annotations

import struct
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, BinaryIO

import numpy as np

from app.speech.pocketsphinx import PocketSphinxStream, load_pocketsphinx
from app.speech.resample import Resampler, to_pcm16
from app.usage import UsageError, require_file
from clients.audio_source import MediaSource, Meter, Reconnect, notify_stderr, url_scheme

RATE = 16000  # PocketSphinx's default model is a 16 kHz one
CHUNK_S = 0.1  # feed granularity: partials at most every 100 ms

_PCM, _FLOAT, _EXTENSIBLE = 1, 3, 0xFFFE
_FORMAT_NAMES = {2: "MS ADPCM", 6: "A-law", 7: "mu-law", 17: "IMA ADPCM", 85: "MP3"}
# the sub-format GUIDs of WAVE_FORMAT_EXTENSIBLE end in this; the first two bytes carry
# the plain format tag (1 = PCM, 3 = float)
_GUID_TAIL = b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"


@dataclass(frozen=True)
class WavFormat:
    """What a WAV's ``fmt `` chunk says about its samples."""

    encoding: str  # "pcm" (signed integers; 8-bit is unsigned) or "float"
    sample_rate: int
    channels: int
    bits: int

    @property
    def frame_bytes(self) -> int:
        return self.channels * self.bits // 8


class WavReader:
    """A RIFF/WAVE file read block by block, so a long recording never sits in memory.

    Python 3.11's ``wave`` module reads 8/16/24/32-bit PCM only and refuses
    WAVE_FORMAT_EXTENSIBLE, which is what most recorders write for 24-bit or multichannel
    audio; this small parser also takes float and extensible WAVs, and names the problem
    in one line for anything else (compressed, truncated, not a WAV).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: BinaryIO = path.open("rb")
        try:
            self.format, self._remaining = self._parse_header()
        except BaseException:
            self._file.close()
            raise

    def _fail(self, why: str) -> UsageError:
        return UsageError(f"--audio {self.path}: {why}")

    def _parse_header(self) -> tuple[WavFormat, int]:
        f = self._file
        head = f.read(12)
        if len(head) < 12 or head[:4] not in (b"RIFF", b"RF64") or head[8:12] != b"WAVE":
            raise self._fail("not a WAV file (no RIFF/WAVE header); give a .wav file, or "
                             "'-' for raw 16 kHz 16-bit mono PCM on stdin")
        fmt: WavFormat | None = None
        while True:
            chunk = f.read(8)
            if len(chunk) < 8:
                raise self._fail("WAV file without a data chunk (truncated?)")
            cid, size = chunk[:4], struct.unpack("<I", chunk[4:])[0]
            if cid == b"fmt ":
                fmt = self._parse_fmt(f.read(size))
                if size % 2:
                    f.read(1)
            elif cid == b"data":
                if fmt is None:
                    raise self._fail("WAV data comes before its format chunk")
                # 0xFFFFFFFF (or a size past the end): a WAV written to a pipe, or RF64;
                # read to the end of the file
                return fmt, (size if size not in (0, 0xFFFFFFFF) else -1)
            else:
                f.seek(size + size % 2, 1)

    def _parse_fmt(self, body: bytes) -> WavFormat:
        if len(body) < 16:
            raise self._fail("WAV format chunk is truncated")
        tag, channels, rate, _, _, bits = struct.unpack("<HHIIHH", body[:16])
        if tag == _EXTENSIBLE and len(body) >= 40 and body[26:40] == _GUID_TAIL:
            tag = struct.unpack("<H", body[24:26])[0]
        if tag == _PCM and bits in (8, 16, 24, 32):
            encoding = "pcm"
        elif tag == _FLOAT and bits in (32, 64):
            encoding = "float"
        else:
            name = _FORMAT_NAMES.get(tag, f"format tag {tag}")
            kind = f"{bits}-bit PCM" if tag == _PCM else name
            raise self._fail(f"unsupported WAV encoding ({kind}); use 8/16/24/32-bit PCM or "
                             "32/64-bit float, e.g. ffmpeg -i IN -ar 16000 -ac 1 OUT.wav")
        if channels < 1 or rate < 1000:
            raise self._fail(f"implausible WAV format ({channels} channels at {rate} Hz)")
        return WavFormat(encoding, rate, channels, bits)

    def blocks(self, frames: int) -> Iterator[np.ndarray]:
        """Blocks of up to ``frames`` frames, shape ``(n, channels)``, int16 scale floats."""
        size = frames * self.format.frame_bytes
        carry = b""
        try:
            while self._remaining != 0:
                want = size if self._remaining < 0 else min(size, self._remaining)
                raw = self._file.read(want)
                if not raw:
                    break
                if self._remaining > 0:
                    self._remaining -= len(raw)
                raw = carry + raw
                usable = len(raw) - len(raw) % self.format.frame_bytes
                carry = raw[usable:]
                if usable:
                    yield decode_samples(raw[:usable], self.format)
        finally:
            self._file.close()

    @property
    def duration_s(self) -> float | None:
        """The audio's length from its data chunk's size (None: written to a pipe)."""
        if self._remaining < 0:
            return None
        return self._remaining / self.format.frame_bytes / self.format.sample_rate

    def close(self) -> None:
        self._file.close()


def decode_samples(raw: bytes, fmt: WavFormat) -> np.ndarray:
    """Interleaved sample bytes as ``(frames, channels)`` floats on the int16 scale."""
    if fmt.encoding == "float":
        x = np.frombuffer(raw, dtype="<f4" if fmt.bits == 32 else "<f8") * 32768.0
    elif fmt.bits == 8:  # 8-bit WAV is unsigned
        x = (np.frombuffer(raw, dtype=np.uint8).astype(np.float64) - 128.0) * 256.0
    elif fmt.bits == 16:
        x = np.frombuffer(raw, dtype="<i2").astype(np.float64)
    elif fmt.bits == 24:
        b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        v = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        x = (np.where(v >= 1 << 23, v - (1 << 24), v) / 256.0).astype(np.float64)
    else:
        x = np.frombuffer(raw, dtype="<i4") / 65536.0
    return np.asarray(x, dtype=np.float64).reshape(-1, fmt.channels)


def downmix(block: np.ndarray) -> np.ndarray:
    """Mono as the mean of the channels (a 1-D block is already mono)."""
    return block if block.ndim == 1 else block.mean(axis=1)


def rechunk(blocks: Iterable[bytes], chunk_bytes: int) -> Iterator[bytes]:
    """Byte blocks of any size as chunks of exactly ``chunk_bytes`` (the last may be short).

    Always a whole number of 16-bit samples: an odd trailing byte is dropped.
    """
    buf = bytearray()
    for block in blocks:
        buf += block
        while len(buf) >= chunk_bytes:
            yield bytes(buf[:chunk_bytes])
            del buf[:chunk_bytes]
    tail = len(buf) - len(buf) % 2
    if tail:
        yield bytes(buf[:tail])


def wav_pcm_blocks(reader: WavReader, block_s: float = CHUNK_S) -> Iterator[bytes]:
    """A WAV's audio as 16 kHz mono s16le byte blocks (sizes vary with resampling)."""
    resampler = Resampler(reader.format.sample_rate)
    frames = max(1, int(reader.format.sample_rate * block_s))
    for block in reader.blocks(frames):
        out = resampler.process(downmix(block))
        if len(out):
            yield to_pcm16(out)


def stream_blocks(stream: IO[bytes], block_bytes: int) -> Iterator[bytes]:
    """Raw bytes from a stream (stdin), as they come, until end of input."""
    read = getattr(stream, "read1", stream.read)
    while True:
        data = read(block_bytes)
        if not data:
            return
        yield data


def paced(chunks: Iterable[bytes], speed: float | None, rate: int = RATE) -> Iterator[bytes]:
    """Chunks released no faster than real time times ``speed`` (``None``: no pacing).

    A file replays as a microphone would deliver it, so partials, finals and their
    latencies look like a live talk; a recogniser slower than real time is never waited for.
    """
    start = time.perf_counter()
    audio_s = 0.0
    for chunk in chunks:
        if speed is not None:
            delay = start + audio_s / speed - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        audio_s += len(chunk) / 2 / rate
        yield chunk


@dataclass
class AudioSource:
    """An opened ``--audio`` input: checked before the client connects to the server.

    ``recognizer`` is the embedded PocketSphinx (``--asr pocketsphinx``); None when the
    server recognises the speech (``--asr server``, the default): then only ``chunks``
    is used, 16 kHz PCM for the server's Whisper. The input is a WAV (``reader``), any
    other file or a live URL (``media``, through PyAV), or raw PCM on stdin (neither).
    ``meter`` follows what has been sent, for the terminal.
    """

    name: str
    reader: WavReader | None  # None: raw PCM on stdin, or ``media``
    recognizer: PocketSphinxStream | None
    media: MediaSource | None = None
    meter: Meter = field(default_factory=lambda: Meter(live=False))

    @property
    def live(self) -> bool:
        """A live URL: the source sets the pace, the client never does."""
        return self.media is not None and self.media.live

    def chunks(self, speed: float | None, chunk_s: float = CHUNK_S) -> Iterator[bytes]:
        """The whole input as 16 kHz s16le mono PCM chunks of ``chunk_s``; a file is paced
        by ``speed`` (None: as fast as they are taken), stdin and a live URL are not
        (whoever writes them sets the pace)."""
        chunk_bytes = int(RATE * chunk_s) * 2
        if self.media is not None:
            blocks = self.media.blocks()
            if self.media.live:
                speed = None
        elif self.reader is not None:
            blocks = wav_pcm_blocks(self.reader)
        else:
            speed = None
            blocks = stream_blocks(sys.stdin.buffer, chunk_bytes)
        return metered(paced(rechunk(blocks, chunk_bytes), speed), self.meter)

    def cancel(self) -> None:
        """End a live input early (Ctrl-C): see ``MediaSource.cancel``."""
        if self.media is not None:
            self.media.cancel()

    def events(self, speed: float | None) -> Iterator[dict]:
        """The embedded recogniser's updates for the whole input."""
        if self.recognizer is None:
            raise ValueError("no embedded recogniser: the server recognises this audio")
        for chunk in self.chunks(speed):
            yield from self.recognizer.feed(chunk)
        yield from self.recognizer.finish()


def metered(chunks: Iterable[bytes], meter: Meter, rate: int = RATE) -> Iterator[bytes]:
    """Chunks passed through, each counted in ``meter`` (position, level) as it leaves."""
    for chunk in chunks:
        meter.add(chunk, rate)
        yield chunk


def is_wav(path: Path) -> bool:
    """A RIFF/WAVE header: read by ``WavReader`` (no FFmpeg needed, any PCM or float)."""
    with path.open("rb") as f:
        head = f.read(12)
    return head[:4] in (b"RIFF", b"RF64") and head[8:12] == b"WAVE"


def _open_input(path: str, timeout_s: float, reconnect: Reconnect,
                notify: Callable[[str], None]) -> tuple[WavReader | None, MediaSource | None]:
    """A WAV's reader, or PyAV for anything else (and for a WAV the reader refuses, such as
    mu-law): the first error of the two names the problem when neither reads it."""
    media = MediaSource(path, RATE, timeout_s, reconnect, notify)
    if url_scheme(path) is not None:
        return None, media.open()
    file = require_file(path, "--audio")
    if not is_wav(file):
        return None, media.open()
    try:
        return WavReader(file), None
    except UsageError as wav_error:
        try:
            return None, media.open()
        except UsageError:
            raise wav_error from None


def open_audio(path: str, embedded: bool = True, *, timeout_s: float = 10.0,
               reconnect: Reconnect | None = None,
               notify: Callable[[str], None] = notify_stderr) -> AudioSource:
    """``--audio PATH|URL|-`` checked up front: missing file, no audio in it, an unreachable
    URL, and (``embedded``: the client recognises the speech itself) missing PocketSphinx."""
    if path == "-":
        recognizer = PocketSphinxStream(load_pocketsphinx()) if embedded else None
        return AudioSource("stdin", None, recognizer)
    reader, media = _open_input(path, timeout_s, reconnect or Reconnect(), notify)
    try:
        recognizer = PocketSphinxStream(load_pocketsphinx()) if embedded else None
    except BaseException:
        if reader is not None:
            reader.close()
        if media is not None:
            media.close()
        raise
    if media is not None:
        return AudioSource(media.name, None, recognizer, media, media.meter)
    assert reader is not None
    return AudioSource(str(reader.path), reader, recognizer,
                       meter=Meter(live=False, duration_s=reader.duration_s))
