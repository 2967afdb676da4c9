"""A streaming speech recogniser: faster-whisper over a growing buffer, LocalAgreement-2
partials and voice-activity endpoints.

Audio arrives as 16 kHz mono samples (``feed``). Silero VAD (shipped with faster-whisper)
looks at the segment's buffer every ``vad_step_s`` of new audio; it is cheap (about 2 ms
per second of buffer). While the buffer holds speech, the VAD also looks at the buffer's
last second or so at every frame in between (at most every ``TAIL_LOOK_S``; cheaper
still): when that tail holds an endpoint, the whole buffer is looked at at once, so an
endpoint is seen at the first frame that reaches its silence, not up to a look later.
Whisper is not: a decode of a few seconds of speech takes about
0.25 s of one CPU thread for Whisper base with its encoder window fitted to the buffer
(``app.speech.whisper_window``, the default), 1.1-1.2 s over the 30 s window
faster-whisper's ``transcribe`` pads to (``window="full"``), so decodes are rationed:

* a **partial** decode of the whole buffer at most every ``step_s`` of audio, and no more
  often than the recogniser's measured decode time allows (``partial_share``: the share of
  a thread one speaker's partials may take). LocalAgreement-2 (``app.speech.agreement``)
  commits the words two consecutive decodes agree on; committed words plus the
  uncommitted tail are the ``partial``.
* when the speech **pauses** (``END_PAD_S`` of silence after it), one decode of the buffer
  up to just after the last word, at once: a partial, and the final if the pause lasts.
* at an **endpoint** (``endpoint_silence_s`` of silence), the segment's text is the
  ``final``; when the pause decode above already heard all of it, no new decode is needed,
  so the final leaves as soon as the pause is long enough.
* a segment that reaches ``max_segment_s`` without a pause is cut after the last word the
  speaker finished (the decode's word timestamps), never inside a word.

The buffer then starts after the segment. A buffer that holds several pauses (the
recogniser fell behind and takes the audio that waited) is cut at each. Silence without
speech is dropped as it comes, so ten minutes of silence cost one second of buffer.

Each final says where in the stream's audio its speech ended and how much audio had been
heard when the segment was decided to end (``SpeechEvent.timing``, a ``FinalTiming``):
the endpoint's part of the time from speech end to caption, and the audio beyond it that
waited for a busy recogniser.

One object is one speaker's stream and is not thread-safe: the caller runs ``feed`` off
the event loop (it decodes), one call at a time. ``feed`` is ``listen`` (add audio),
``next_decode`` (what the VAD says is needed) and ``run`` (the decode): a recogniser that
serves many speakers (``app.speech.service``) calls the three itself, to run the decodes
finals wait for before anyone's partials. Streams may share one model
(``load_whisper``): the server loads it once for every audio speaker.

``StreamingWhisper`` is a ``Recognizer`` (``app.speech.recognizer``); the model behind its
streaming logic is a ``Transcriber`` (``WhisperTranscriber``: faster-whisper) and the
voice activity a ``VoiceDetector`` (``SileroVad``), so another offline recogniser plugs in
under the same buffering, agreement and endpoints.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.speech.agreement import LocalAgreement, Word
from app.speech.model_files import resolve_asr_model
from app.speech.recognizer import (
    SAMPLE_RATE,
    FinalTiming,
    SpeechEvent,
    SpeechSpan,
    Transcriber,
    VoiceDetector,
)
from app.speech.whisper_window import FittedWindowTranscriber

__all__ = ["END_PAD_S", "SAMPLE_RATE", "WINDOWS", "Decode", "SileroVad", "SpeechEvent",
           "StreamingWhisper", "WhisperTranscriber", "load_whisper", "whisper_transcriber"]

# Whisper's encoder window: ``fit`` the buffer (``app.speech.whisper_window``, the default)
# or the ``full`` 30 s faster-whisper's ``transcribe`` always pads to
WINDOWS = ("fit", "full")

END_PAD_S = 0.3  # audio after the end of speech that a segment's last decode still hears
# A segment cut at its length limit ends after a word that ended at least this long before
# the buffer's end: the word being spoken at the cut is heard whole in the next segment.
LONG_TAIL_S = 0.6
# Between the VAD's looks at the buffer (``vad_step_s``), while it holds speech: a look at
# the buffer's tail, ``endpoint_silence_s`` + ``TAIL_SPEECH_S`` long (speech, then the
# silence an endpoint needs), at most every ``TAIL_LOOK_S`` of audio; it starts on the
# VAD's grid of ``VAD_GRID`` samples (Silero's window), so it hears what a look at the
# whole buffer hears there.
TAIL_SPEECH_S = 0.5
TAIL_LOOK_S = 0.1
VAD_GRID = 512


@dataclass(frozen=True)
class Decode:
    """One decode a stream needs (``StreamingWhisper.next_decode``): its kind and the
    buffer's end it hears. ``final`` and ``long`` end the segment; a ``pause`` decode is
    the one a final at that pause will use; only ``partial`` may be thinned."""

    kind: str  # "final" | "long" | "pause" | "partial"
    end: int
    speech_end: int | None = None  # a final: where its speech ended (the VAD's edge)

    @property
    def ends_segment(self) -> bool:
        return self.kind in ("final", "long")

    @property
    def urgent(self) -> bool:
        """Decodes a final waits for go before partial decodes of other speakers."""
        return self.kind != "partial"


def _finished_words(words: list[Word], before_s: float) -> list[Word]:
    """The words up to the last one that ended by ``before_s`` (seconds into the buffer)."""
    last = max((i for i, w in enumerate(words) if w.end <= before_s), default=-1)
    return words[: last + 1]


def load_whisper(model_dir: str | Path | None = None, threads: int = 1,
                 device: str = "cpu") -> Any:
    """A faster-whisper model (int8 on the CPU): the bundled Whisper base unless
    ``model_dir`` names a CTranslate2 Whisper folder. One model serves every stream of a
    process (``StreamingWhisper(model=...)``); ``threads`` bounds its CPU share."""
    from faster_whisper import WhisperModel

    return WhisperModel(str(resolve_asr_model(model_dir)), device=device,
                        compute_type="int8" if device == "cpu" else "default",
                        cpu_threads=threads)


class WhisperTranscriber:
    """A ``Transcriber`` over a faster-whisper model: greedy, with word timestamps, each
    buffer on its own (no previous text, no VAD of its own: the stream has one)."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def transcribe(self, audio: np.ndarray, language: str) -> list[Word]:
        segments, _ = self.model.transcribe(
            audio, language=language, beam_size=1, word_timestamps=True,
            condition_on_previous_text=False, vad_filter=False, temperature=0.0)
        return [Word(w.word, w.start, w.end) for s in segments for w in (s.words or [])]


def whisper_transcriber(model: Any, window: str = "fit") -> Transcriber:
    """The ``Transcriber`` over a faster-whisper model for an encoder ``window``."""
    if window not in WINDOWS:
        raise ValueError(f"unknown Whisper window {window!r}: one of {', '.join(WINDOWS)}")
    full = WhisperTranscriber(model)
    return FittedWindowTranscriber(model, fallback=full) if window == "fit" else full


class SileroVad:
    """A ``VoiceDetector``: Silero VAD as shipped with faster-whisper (about 2 ms per
    second of buffer)."""

    def speech(self, audio: np.ndarray, min_silence_s: float) -> list[SpeechSpan]:
        from faster_whisper.vad import VadOptions, get_speech_timestamps

        return get_speech_timestamps(audio, VadOptions(
            min_silence_duration_ms=int(min_silence_s * 1000), speech_pad_ms=100))


class StreamingWhisper:
    """One speaker's ``Recognizer``: faster-whisper (or any ``transcriber``) over a growing
    buffer, with Silero VAD (or any ``vad``) for its pauses and endpoints."""

    def __init__(self, model_dir: str | Path | None = None, language: str = "en",
                 threads: int = 1, step_s: float = 1.0, endpoint_silence_s: float = 0.6,
                 max_segment_s: float = 20.0, device: str = "cpu",
                 model: Any | None = None, vad_step_s: float = 0.25,
                 partial_share: float = 0.5, transcriber: Transcriber | None = None,
                 vad: VoiceDetector | None = None, window: str = "fit") -> None:
        if transcriber is None:
            transcriber = whisper_transcriber(
                model if model is not None else load_whisper(model_dir, threads, device),
                window)
        self.transcriber = transcriber
        self.vad = vad if vad is not None else SileroVad()
        self.language = language
        self.step_s = step_s
        self.vad_step_s = vad_step_s
        self.partial_share = partial_share
        self.endpoint_silence_s = endpoint_silence_s
        self.max_segment_s = max_segment_s
        self.buffer = np.zeros(0, dtype=np.float32)
        self.start = 0  # where the buffer starts in the stream's audio (samples)
        self.smallest_listen = 0  # the smallest audio taken in at once: the client's frame
        self.unchecked = 0  # samples fed since the VAD last looked
        self.since_look = 0  # samples fed since the VAD last looked, at the tail or all
        self.speaking = False  # the VAD's last look saw speech in the buffer
        self.segment = 0
        self.policy = LocalAgreement()
        self.last_partial = ""
        self.decode_s = 0.0  # how long the last decode took (wall clock)
        # (buffer length decoded, its words) of the segment's last decode
        self.decoded: tuple[int, list[Word]] | None = None
        self.paused_at: int | None = None  # the decode a pause partial last went out for

    def feed(self, samples: np.ndarray) -> list[SpeechEvent]:
        """Add audio (float32 in [-1, 1], 16 kHz mono); returns what it made known."""
        self.listen(samples)
        if not self.due():
            return []
        return self.step()

    # -- the two halves of ``feed``, for a recogniser that schedules many streams ---------
    def listen(self, samples: np.ndarray) -> None:
        """Add audio without looking at it (cheap: no VAD, no decode)."""
        self.buffer = np.concatenate([self.buffer, np.asarray(samples, dtype=np.float32)])
        self.unchecked += len(samples)
        self.since_look += len(samples)
        if len(samples) and (not self.smallest_listen or len(samples) < self.smallest_listen):
            self.smallest_listen = len(samples)

    def due(self) -> bool:
        """Enough new audio arrived for the VAD to look again (``vad_step_s``), or the
        buffer's tail already holds an endpoint (``_endpoint_in_tail``); resets the count
        when it says yes."""
        if self.unchecked < self.vad_step_s * SAMPLE_RATE and not self._endpoint_in_tail():
            return False
        self.unchecked = self.since_look = 0
        return True

    def _endpoint_in_tail(self) -> bool:
        """While the buffer holds speech, whether the VAD over its tail alone (about
        ``endpoint_silence_s`` + ``TAIL_SPEECH_S``; a few milliseconds) sees speech end
        ``endpoint_silence_s`` before the buffer's end, or a pause within it. It only says
        when to look: the look at the whole buffer (``next_decode``) decides."""
        if not self.speaking or self.since_look < TAIL_LOOK_S * SAMPLE_RATE:
            return False
        self.since_look = 0
        size = len(self.buffer)
        tail = int((self.endpoint_silence_s + TAIL_SPEECH_S) * SAMPLE_RATE)
        start = max(0, size - tail) // VAD_GRID * VAD_GRID
        speech = self.vad.speech(self.buffer[start:], self.endpoint_silence_s)
        if not speech:
            return False
        silence = size - start - speech[-1]["end"]
        return len(speech) > 1 or silence >= self.endpoint_silence_s * SAMPLE_RATE

    def step(self) -> list[SpeechEvent]:
        """Look at the buffer now: finals at the endpoints it holds, then maybe a partial
        of the speech after the last one (or nothing)."""
        events: list[SpeechEvent] = []
        while (decode := self.next_decode()) is not None:
            events += self.run(decode)
            if not decode.ends_segment:
                break
        return events

    def next_decode(self) -> Decode | None:
        """The decode the buffer needs next, from the VAD alone (about 2 ms per second of
        buffer): ``final`` at an endpoint, ``long`` for a segment at its length limit,
        ``pause`` when the speech just paused (the decode a final will use), ``partial``
        when the last one is ``step_s`` (or the rationed share) old, or None.

        Separate VAD spans are pauses of at least ``endpoint_silence_s``, so each span but
        the last ends a segment.
        """
        pad = int(END_PAD_S * SAMPLE_RATE)
        speech = self._speech()
        self.speaking = bool(speech)
        if not speech:  # silence only: keep the last second (speech may be starting)
            self.start += max(0, len(self.buffer) - SAMPLE_RATE)
            self.buffer = self.buffer[-SAMPLE_RATE:]
            self.decoded = self.paused_at = None
            return None
        if len(speech) > 1:
            return Decode("final", min(speech[0]["end"] + pad, speech[1]["start"]),
                          speech[0]["end"])
        size, speech_end = len(self.buffer), speech[-1]["end"]
        cut = min(size, speech_end + pad)
        if (size - speech_end) / SAMPLE_RATE >= self.endpoint_silence_s:
            # a little of the silence after the last word: cut at the VAD's edge,
            # Whisper mishears the last word ("next spring" -> "next, bring")
            return Decode("final", cut, speech_end)
        if size / SAMPLE_RATE >= self.max_segment_s:
            return Decode("long", size)
        if size - speech_end >= pad and not self._paused(cut):
            # a pause: maybe the segment's end. A partial that already heard up to it
            # (decoded a moment before the pause was long enough) goes out again marked
            # as the pause's, without a decode: the final will take its words.
            return Decode("pause", cut)
        since = size - (self.decoded[0] if self.decoded else 0)
        gap_s = max(self.step_s, self.decode_s / self.partial_share)
        if since >= gap_s * SAMPLE_RATE:
            return Decode("partial", size)
        return None

    def run(self, decode: Decode) -> list[SpeechEvent]:
        """Carry out ``decode`` (from ``next_decode``): Whisper over the buffer up to its
        end, and the events that makes known."""
        if decode.kind == "final":
            return self._end_segment(decode.end, timing=self._timing(
                "silence", decode.speech_end, len(self.buffer)))
        if decode.kind == "long":
            return self._cut_long(decode.end)
        return self._partial(decode.end, pause=decode.kind == "pause")

    def _cut_long(self, end: int) -> list[SpeechEvent]:
        """A segment at ``max_segment_s`` with no pause: the final ends after the last word
        the speaker has finished (word timestamps), never inside a word; the rest of the
        buffer starts the next segment. Without a word to cut after, the buffer's end."""
        words = self._decode(self.buffer[:end])
        keep = _finished_words(words, end / SAMPLE_RATE - LONG_TAIL_S)
        if not keep:
            return self._end_segment(end, words, self._timing("length", end, len(self.buffer)))
        after = words[len(keep)] if len(keep) < len(words) else None
        boundary = keep[-1].end if after is None else (keep[-1].end + after.start) / 2
        cut = min(end, max(1, int(boundary * SAMPLE_RATE)))
        return self._end_segment(cut, keep, self._timing("length", cut, len(self.buffer)))

    def _heard(self, end: int) -> bool:
        """The segment's last decode heard the buffer up to ``end`` (give or take 100 ms
        of silence: the VAD's edge moves a little as it hears more)."""
        return self.decoded is not None and abs(self.decoded[0] - end) <= SAMPLE_RATE // 10

    def _paused(self, end: int) -> bool:
        """A pause partial already went out for the segment's decode that heard up to
        ``end``."""
        return self._heard(end) and self.paused_at == self.decoded[0]

    def _partial(self, end: int, pause: bool = False) -> list[SpeechEvent]:
        """A partial of the buffer up to ``end``. At a ``pause`` it goes out even when its
        text is the last partial's, marked as such: a final at this pause takes this decode's
        words whole (``_end_segment``), so its text is the final's unless the speaker goes
        on, and the translation can start on it before the endpoint's silence is over. A
        pause the last decode already heard costs no decode: its words are told again."""
        if pause and self._heard(end):
            self.paused_at = self.decoded[0]
            text = self.policy.text(self.policy.committed + self.policy.tail)
            if not text:
                return []
            self.last_partial = text
            return [SpeechEvent("partial", self.segment, text, pause=True)]
        words = self._decode(self.buffer[:end])
        self.decoded = (end, words)
        if pause:
            self.paused_at = end
        self.policy.update(words)
        text = self.policy.text(self.policy.committed + self.policy.tail)
        if not text or (text == self.last_partial and not pause):
            return []
        self.last_partial = text
        return [SpeechEvent("partial", self.segment, text, pause=pause)]

    def flush(self) -> list[SpeechEvent]:
        """The stream ended: the segment in progress becomes a final (if it holds speech)."""
        events = self.step() if self.unchecked else []  # pauses in the last few frames
        self.unchecked = 0
        speech = self._speech() if len(self.buffer) else []
        if not speech:
            # Whisper tends to hear words in silence ("Thank you."): never decode it
            self.start += len(self.buffer)
            self.buffer = self.buffer[:0]
            self.speaking = False
            return events
        size = len(self.buffer)
        return events + self._end_segment(size, timing=self._timing(
            "stop", speech[-1]["end"], size))

    def _speech(self) -> list[SpeechSpan]:
        """The VAD's speech spans in the buffer (sample offsets)."""
        return self.vad.speech(self.buffer, self.endpoint_silence_s)

    def _timing(self, ended_by: str, speech_end: int | None, heard: int) -> FinalTiming:
        """Where a final's speech ended and how much had been heard when it was decided
        (buffer offsets, as seconds of the stream's audio). For an endpoint, the audio
        heard beyond its silence and one look of the VAD (``vad_step_s``, rounded up to the
        client's frames: an idle recogniser looks no more often) is ``late_s``: it came
        while the recogniser was busy with other decodes."""
        end = heard if speech_end is None else min(speech_end, heard)
        late = 0
        if ended_by == "silence":
            step = int(self.vad_step_s * SAMPLE_RATE)
            frame = self.smallest_listen or step
            look = math.ceil(step / frame) * frame
            late = max(0, heard - end - int(self.endpoint_silence_s * SAMPLE_RATE) - look)
        return FinalTiming(ended_by, (self.start + end) / SAMPLE_RATE,
                           (self.start + heard) / SAMPLE_RATE, late / SAMPLE_RATE)

    def _end_segment(self, end: int, words: list[Word] | None = None,
                     timing: FinalTiming | None = None) -> list[SpeechEvent]:
        if words is None:
            words = self.decoded[1] if self._heard(end) else self._decode(self.buffer[:end])
        self.policy.finish(words)
        text = self.policy.text()
        events = [SpeechEvent("final", self.segment, text, timing)] if text else []
        self.start += end
        self.buffer = self.buffer[end:]
        self.policy = LocalAgreement()
        self.last_partial = ""
        self.decoded = self.paused_at = None
        if events:
            self.segment += 1
        return events

    def _decode(self, audio: np.ndarray) -> list[Word]:
        began = time.perf_counter()
        words = self.transcriber.transcribe(audio, self.language)
        self.decode_s = time.perf_counter() - began
        return words
