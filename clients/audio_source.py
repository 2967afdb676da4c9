"""Any audio FFmpeg reads, as the PCM ``WebSocket /v1/live`` takes: a file of any container
and codec, or a live URL, decoded through PyAV and resampled to s16le mono.

    livetrans caption --audio talk.m4a --room keynote          # MP3, Opus, MP4, MKV ...
    livetrans caption --audio http://cdn.example/live/room1.m3u8 --room keynote
    livetrans caption --audio rtmp://encoder.local/live/room1 --room keynote

PyAV's wheels carry their own FFmpeg, so the client needs no system FFmpeg; which network
protocols that build reads is listed in docs/speech.md ("Audio sources"). The first audio
stream of the input is used (a video's picture is never decoded). Decoding streams: a block
is yielded as soon as it is decoded and nothing is kept, so an hour of silence costs no more
memory than a second of it.

A URL is a live source: a read that stalls past the timeout or fails, or (for stream
protocols: RTMP, RTSP, SRT, UDP, TCP) an end of stream, is a drop, and the source is
reopened with backoff, each step told on the terminal, until it comes back or has stayed
away for the give-up time, which ends the talk like the end of a file. An HLS stream ends
when its playlist says so (``#EXT-X-ENDLIST``; reopening it would replay the talk from its
start); FFmpeg's demuxer also ends one whose playlist stopped growing, which is a drop. A
file on a web server ends at its end.

The server never opens a URL a client names: the client reads the source and sends PCM.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin
from urllib.request import urlopen

import numpy as np

try:
    import av
except ModuleNotFoundError:  # an install of the 'clients' extra from before it had PyAV:
    av = None  # WAV files and stdin still work, anything else is refused in one line

from app.usage import UsageError, require_file

# a URL with one of these schemes ends when its stream ends; every other URL's end of
# stream is a drop (the encoder went away) and it is reopened
_ENDS_AT_EOF = ("http", "https", "file")
# how far back a reopened HLS stream may start (3 segments): frames this far before the
# last one sent are skipped as sent already
_OVERLAP_S = 30.0
_RELAY_HINT = ("relay it to a protocol it reads, e.g. ffmpeg -i SOURCE -vn -f mpegts "
               "udp://127.0.0.1:5000 and --audio udp://127.0.0.1:5000")


def url_scheme(spec: str) -> str | None:
    """``rtmp`` for ``rtmp://host/app``; None for a path (``C:/talk.wav`` is no URL)."""
    scheme, sep, _ = spec.partition("://")
    if sep and len(scheme) > 1 and scheme.replace("+", "").replace("-", "").isalnum():
        return scheme.lower()
    return None


def shown(spec: str) -> str:
    """``rtmp://user:secret@host/app`` as ``rtmp://***@host/app``: a terminal or a log is
    no place for the credentials a URL may carry."""
    scheme, sep, rest = spec.partition("://")
    host, slash, path = rest.partition("/")
    if not sep or "@" not in host:
        return spec
    return f"{scheme}://***@{host.rsplit('@', 1)[1]}{slash}{path}"


def hls_ended(url: str, timeout_s: float) -> bool:
    """Whether the HLS playlist at ``url`` says its stream is over (``#EXT-X-ENDLIST``; a
    master playlist: its first variant's). False when it cannot be read: then the end was a
    drop, and reopening it finds out."""
    try:
        text = _fetch(url, timeout_s)
        if "#EXT-X-STREAM-INF" in text:
            lines = [line.strip() for line in text.splitlines()]
            variant = next(line for line in lines if line and not line.startswith("#"))
            text = _fetch(urljoin(url, variant), timeout_s)
    except (OSError, ValueError, StopIteration):
        return False
    return "#EXT-X-ENDLIST" in text


def _fetch(url: str, timeout_s: float) -> str:
    with urlopen(url, timeout=timeout_s) as response:  # noqa: S310 - the user's own source
        return response.read(4 * 2**20).decode("utf-8", "replace")


def notify_stderr(message: str) -> None:
    """The default way a source says what happens to it: one line on stderr."""
    print(f"livetrans caption: {message}", file=sys.stderr, flush=True)


@dataclass
class Meter:
    """What the terminal shows about the input while it is sent: written by the thread
    that decodes, read by the display (plain fields, so a torn read is only a stale one)."""

    live: bool
    duration_s: float | None = None  # a file's length, when its container says
    position_s: float = 0.0  # audio sent so far (a live source: since the start)
    level_dbfs: float = -math.inf  # RMS of the latest block, dB relative to full scale
    reconnects: int = 0
    state: str = ""  # "" while audio flows; else what the source is waiting for

    def add(self, pcm: bytes, rate: int) -> None:
        """Account for one s16le mono block that is about to be sent."""
        samples = np.frombuffer(pcm, dtype="<i2")
        if len(samples):
            rms = float(np.sqrt(np.mean(samples.astype(np.float64) ** 2)))
            self.level_dbfs = 20 * math.log10(rms / 32768.0) if rms > 0 else -math.inf
            self.position_s += len(samples) / rate

    def line(self) -> str:
        """``12.4 s / 31.0 s (40%)  ▮▮▮▮▮▯▯▯▯▯▯▯ -23 dBFS``: progress, then the level."""
        if self.duration_s:
            pct = min(100, round(100 * self.position_s / self.duration_s))
            where = f"{self.position_s:.1f} s / {self.duration_s:.1f} s ({pct}%)"
        else:
            where = ("live " if self.live else "") + f"{self.position_s:.1f} s"
        level = max(-60.0, self.level_dbfs)  # -60 dBFS and below: an empty bar
        bars = round((level + 60) / 5)
        db = "silence" if self.level_dbfs == -math.inf else f"{self.level_dbfs:.0f} dBFS"
        parts = [where, "▮" * bars + "▯" * (12 - bars), db]
        if self.reconnects:
            parts.append(f"reconnected {self.reconnects}x")
        if self.state:
            parts.append(self.state)
        return "  ".join(parts)


@dataclass(frozen=True)
class Reconnect:
    """How a live source that drops is reopened: waits of ``first_s``, doubling up to
    ``max_s``, until it is back or ``give_up_s`` have passed since it dropped."""

    first_s: float = 0.5
    max_s: float = 10.0
    give_up_s: float = 600.0

    def delays(self) -> Iterator[float]:
        delay = self.first_s
        while True:
            yield delay
            delay = min(self.max_s, delay * 2)


def _reason(exc: BaseException, timeout_s: float | None) -> str:
    """An FFmpeg error as a few words (PyAV's text repeats the URL and an errno)."""
    if isinstance(exc, av.error.ExitError) and timeout_s is not None:
        return f"nothing arrived for {timeout_s:g} s"
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return str(text).splitlines()[0]


class _Pcm:
    """Decoded frames as s16le mono at ``rate``: PyAV's resampler (libswresample), made
    anew when the input's format changes (a live stream may switch rate or layout)."""

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self._resampler: av.AudioResampler | None = None
        self._shape: tuple[Any, ...] | None = None

    def convert(self, frame: av.AudioFrame) -> bytes:
        shape = (frame.format.name, frame.layout.name, frame.sample_rate)
        out = b""
        if shape != self._shape:
            out = self.flush()
            self._resampler = av.AudioResampler(format="s16", layout="mono", rate=self.rate)
            self._shape = shape
        frame.pts = None  # timestamps jump when a live source comes back; none are needed
        assert self._resampler is not None
        return out + b"".join(f.to_ndarray().tobytes() for f in self._resampler.resample(frame))

    def flush(self) -> bytes:
        if self._resampler is None:
            return b""
        tail = b"".join(f.to_ndarray().tobytes() for f in self._resampler.resample(None))
        self._resampler = None
        self._shape = None
        return tail


@dataclass
class MediaSource:
    """An ``--audio`` file or URL opened through PyAV. ``open`` checks it eagerly (no audio
    stream, a corrupt file, an unreachable URL, a protocol this FFmpeg lacks: one
    ``UsageError`` line), before the client contacts the server; ``blocks`` then streams it.
    """

    spec: str
    rate: int = 16000
    timeout_s: float = 10.0  # a URL: opening it, and the longest wait for its next packet
    reconnect: Reconnect = field(default_factory=Reconnect)
    notify: Callable[[str], None] = notify_stderr
    # the backoff's waits (default: until ``cancel``) and its clock, replaceable so that
    # tests need not wait
    sleep: Callable[[float], Any] | None = None
    clock: Callable[[], float] = time.monotonic
    scheme: str | None = field(init=False)
    meter: Meter = field(init=False)
    _container: Any = field(init=False, default=None)
    _stream: Any = field(init=False, default=None)
    _cancelled: threading.Event = field(init=False, default_factory=threading.Event)
    _hls: bool = field(init=False, default=False)  # the URL is an HLS playlist
    # the stream time (s) up to which audio was sent, and after a reopen, up to which the
    # reopened stream's audio was sent already (HLS serves its newest segment again)
    _sent_until: float | None = field(init=False, default=None)
    _skip_until: float | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.scheme = url_scheme(self.spec)
        self.meter = Meter(live=self.live)
        if self.sleep is None:
            self.sleep = self._cancelled.wait

    def cancel(self) -> None:
        """End the input from another thread (Ctrl-C on a live source): a reconnect wait
        ends at once, and ``blocks`` stops at its next block (a read in progress still
        takes up to ``timeout_s``)."""
        self._cancelled.set()

    @property
    def live(self) -> bool:
        """A URL: a live source, reopened when it drops, never paced by the client."""
        return self.scheme is not None

    @property
    def name(self) -> str:
        """The source as messages show it: a URL's ``user:password@`` is hidden."""
        return shown(self.spec)

    def open(self) -> MediaSource:
        """Open the input and find its first audio stream; ``UsageError`` if it cannot be."""
        if not self.live:
            require_file(self.spec, "--audio")
        if av is None:
            raise UsageError(f"--audio {self.name}: reading anything but a WAV file or '-' "
                             "needs PyAV: pip install 'livetrans[clients]'")
        try:
            self._container, self._stream = self._open()
        except av.error.ProtocolNotFoundError:
            raise UsageError(f"--audio {self.name}: this client's FFmpeg (PyAV {av.__version__}) "
                             f"does not read {self.scheme}://; {_RELAY_HINT}") from None
        except (av.error.FFmpegError, OSError) as exc:
            why = _reason(exc, self.timeout_s if self.live else None)
            if self.live:
                raise UsageError(f"--audio {self.name}: cannot open the source ({why})") from None
            raise UsageError(f"--audio {self.name}: not a WAV file nor any other audio "
                             f"FFmpeg reads ({why})") from None
        if not self.live:
            self.meter.duration_s = self._duration_s()
        else:
            self._hls = self._container.format.name == "hls"
        return self

    def _duration_s(self) -> float | None:
        """The audio stream's length (a video's container may run longer than its sound)."""
        stream = self._stream
        if stream.duration and stream.time_base:
            return float(stream.duration * stream.time_base)
        duration = self._container.duration
        return duration / av.time_base if duration and duration > 0 else None

    def _open(self) -> tuple[Any, Any]:
        kwargs: dict[str, Any] = {"timeout": self.timeout_s} if self.live else {}
        container = av.open(self.spec, **kwargs)
        try:
            if not container.streams.audio:
                kinds = ", ".join(sorted({s.type for s in container.streams})) or "none"
                raise UsageError(f"--audio {self.name}: no audio stream (its streams: {kinds})")
            return container, container.streams.audio[0]
        except BaseException:
            container.close()
            raise

    def close(self) -> None:
        if self._container is not None:
            self._container.close()
            self._container = None

    def blocks(self) -> Iterator[bytes]:
        """The input as s16le mono PCM at ``rate``, block by block as it is decoded; a live
        source is reopened when it drops, until it stays away for the give-up time."""
        if self._container is None:
            self.open()
        while self._container is not None and not self._cancelled.is_set():
            try:
                yield from self._decode(self._container, self._stream)
                if not self.live or self._ended():
                    return
                why = "the stream ended"
            except (av.error.FFmpegError, OSError) as exc:
                why = _reason(exc, self.timeout_s if self.live else None)
                if not self.live:
                    raise UsageError(f"--audio {self.name}: unreadable after "
                                     f"{self.meter.position_s:.1f} s ({why})") from None
            finally:
                self.close()
            self._reopen(why)

    def _ended(self) -> bool:
        """A live source's end of stream is the end of the talk (True), or a drop."""
        if self._hls:
            return hls_ended(self.spec, self.timeout_s)
        return self.scheme in _ENDS_AT_EOF

    def _decode(self, container: Any, stream: Any) -> Iterator[bytes]:
        pcm = _Pcm(self.rate)
        decoded = bad = 0
        for packet in container.demux(stream):
            if self._cancelled.is_set():
                return
            try:
                frames = packet.decode()
            except av.error.InvalidDataError:
                bad += 1  # a damaged packet: skipped, as ffmpeg itself does
                continue
            for frame in frames:
                decoded += 1
                if self._already_sent(frame):
                    continue
                if block := pcm.convert(frame):
                    yield block
        if tail := pcm.flush():
            yield tail
        if not decoded and bad and not self.live:
            raise UsageError(f"--audio {self.name}: no decodable audio ({bad} damaged packets)")

    def _already_sent(self, frame: Any) -> bool:
        """Whether ``frame`` was sent before a drop: a reopened HLS playlist starts a few
        segments back, which were read already; their frames carry the same stream times
        as before (a producer that restarted its clock more than ``_OVERLAP_S`` below the
        last one sent is not skipped)."""
        if frame.pts is None or frame.time_base is None:
            self._skip_until = None
            return False
        start = float(frame.pts * frame.time_base)
        end = start + frame.samples / frame.sample_rate
        if self._skip_until is not None:
            if self._skip_until - _OVERLAP_S <= start and end <= self._skip_until + 0.001:
                return True
            self._skip_until = None
        self._sent_until = end
        return False

    def _reopen(self, why: str) -> None:
        """Reopen after a drop, with backoff; leaves ``_container`` None when giving up."""
        dropped_at = self.clock()
        self.notify(f"{self.name}: the source dropped ({why}); reopening")
        for attempt, delay in enumerate(self.reconnect.delays(), 1):
            waited = self.clock() - dropped_at
            if waited + delay > self.reconnect.give_up_s:
                self.meter.state = ""
                self.notify(f"{self.name}: still gone after {waited:.0f} s (reconnecting for "
                            f"{self.reconnect.give_up_s:g} s at most); the talk ends here")
                return
            self.meter.state = f"source dropped, reopening in {delay:g} s (attempt {attempt})"
            assert self.sleep is not None
            self.sleep(delay)
            if self._cancelled.is_set():
                return
            try:
                self._container, self._stream = self._open()
                # a reopened live HLS playlist starts 3 segments back (FFmpeg's default):
                # what was sent before the drop is skipped, what came meanwhile is not lost
                self._skip_until = self._sent_until if self._hls else None
            except (av.error.FFmpegError, OSError, UsageError) as exc:
                why = exc.args[0] if isinstance(exc, UsageError) else _reason(exc, self.timeout_s)
                self.notify(f"{self.name}: attempt {attempt} failed ({why})")
                continue
            self.meter.reconnects += 1
            self.meter.state = ""
            self.notify(f"{self.name}: reopened after {self.clock() - dropped_at:.1f} s "
                        f"(attempt {attempt})")
            return
