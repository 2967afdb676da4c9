"""A streaming speech recogniser: faster-whisper over a growing buffer, LocalAgreement-2
partials and voice-activity endpoints.

Audio arrives as 16 kHz mono samples (``feed``). Every ``step_s`` of new audio the current
segment's buffer is decoded again (greedy, word timestamps); LocalAgreement-2
(``app.speech.agreement``) commits the words two consecutive decodes agree on, and the
segment's text so far (committed words plus the uncommitted tail) is a ``partial``. Silero
VAD (shipped with faster-whisper) finds the end of speech: once the buffer ends in
``endpoint_silence_s`` of silence after speech, or the segment reaches ``max_segment_s``,
the segment is decoded one last time and its text is a ``final``; the buffer then starts
after it. Silence without speech is dropped as it comes, so ten minutes of silence cost
one second of buffer, never more.

One object is one speaker's stream and is not thread-safe: the caller runs ``feed`` off
the event loop (it decodes), one call at a time. Streams may share one model
(``load_whisper``): the server loads it once for every audio speaker.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.speech.agreement import LocalAgreement, Word
from app.speech.model_files import resolve_asr_model

SAMPLE_RATE = 16_000
END_PAD_S = 0.3  # audio after the end of speech that a segment's last decode still hears


@dataclass(frozen=True)
class SpeechEvent:
    """``partial`` (the segment's text so far) or ``final`` (the segment's last text)."""

    kind: str
    segment: int
    text: str


def load_whisper(model_dir: str | Path | None = None, threads: int = 1,
                 device: str = "cpu") -> Any:
    """A faster-whisper model (int8 on the CPU): the bundled Whisper base unless
    ``model_dir`` names a CTranslate2 Whisper folder. One model serves every stream of a
    process (``StreamingWhisper(model=...)``); ``threads`` bounds its CPU share."""
    from faster_whisper import WhisperModel

    return WhisperModel(str(resolve_asr_model(model_dir)), device=device,
                        compute_type="int8" if device == "cpu" else "default",
                        cpu_threads=threads)


class StreamingWhisper:
    def __init__(self, model_dir: str | Path | None = None, language: str = "en",
                 threads: int = 1, step_s: float = 1.0, endpoint_silence_s: float = 0.6,
                 max_segment_s: float = 20.0, device: str = "cpu",
                 model: Any | None = None) -> None:
        self.model = model if model is not None else load_whisper(model_dir, threads, device)
        self.language = language
        self.step_s = step_s
        self.endpoint_silence_s = endpoint_silence_s
        self.max_segment_s = max_segment_s
        self.buffer = np.zeros(0, dtype=np.float32)
        self.pending = 0  # samples fed since the last decode
        self.segment = 0
        self.policy = LocalAgreement()
        self.last_partial = ""

    def feed(self, samples: np.ndarray) -> list[SpeechEvent]:
        """Add audio (float32 in [-1, 1], 16 kHz mono); returns what it made known."""
        self.buffer = np.concatenate([self.buffer, np.asarray(samples, dtype=np.float32)])
        self.pending += len(samples)
        if self.pending < self.step_s * SAMPLE_RATE:
            return []
        self.pending = 0
        return self.step()

    def step(self) -> list[SpeechEvent]:
        """Decode the segment's buffer now: finals at the endpoints it holds, then a
        partial of the speech after the last one (or nothing).

        A buffer may hold several endpoints: when recognition falls behind (many
        speakers, few threads) one step takes all the audio that arrived meanwhile.
        Separate VAD spans are pauses of at least ``endpoint_silence_s``, so each span
        but the last ends a segment.
        """
        events: list[SpeechEvent] = []
        while True:
            speech = self._speech()
            if not speech:  # silence only: keep the last second (speech may be starting)
                self.buffer = self.buffer[-SAMPLE_RATE:]
                return events
            pad = int(END_PAD_S * SAMPLE_RATE)
            if len(speech) > 1:
                events += self._end_segment(min(speech[0]["end"] + pad, speech[1]["start"]))
                continue
            duration = len(self.buffer) / SAMPLE_RATE
            speech_end = speech[-1]["end"] / SAMPLE_RATE
            if duration - speech_end >= self.endpoint_silence_s or \
                    duration >= self.max_segment_s:
                # a little of the silence after the last word: cut at the VAD's edge,
                # Whisper mishears the last word ("next spring" -> "next, bring")
                return events + self._end_segment(
                    min(len(self.buffer), speech[-1]["end"] + pad))
            self.policy.update(self._decode(self.buffer))
            text = self.policy.text(self.policy.committed + self.policy.tail)
            if not text or text == self.last_partial:
                return events
            self.last_partial = text
            return [*events, SpeechEvent("partial", self.segment, text)]

    def flush(self) -> list[SpeechEvent]:
        """The stream ended: the segment in progress becomes a final (if it holds speech)."""
        if not len(self.buffer) or not self._speech():
            # Whisper tends to hear words in silence ("Thank you."): never decode it
            self.buffer = self.buffer[:0]
            return []
        return self._end_segment(len(self.buffer))

    def _speech(self) -> list[dict]:
        """Silero VAD's speech spans in the buffer (sample offsets)."""
        from faster_whisper.vad import VadOptions, get_speech_timestamps

        return get_speech_timestamps(self.buffer, VadOptions(
            min_silence_duration_ms=int(self.endpoint_silence_s * 1000), speech_pad_ms=100))

    def _end_segment(self, end: int) -> list[SpeechEvent]:
        self.policy.finish(self._decode(self.buffer[:end]))
        text = self.policy.text()
        events = [SpeechEvent("final", self.segment, text)] if text else []
        self.buffer = self.buffer[end:]
        self.policy = LocalAgreement()
        self.last_partial = ""
        if events:
            self.segment += 1
        return events

    def _decode(self, audio: np.ndarray) -> list[Word]:
        segments, _ = self.model.transcribe(
            audio, language=self.language, beam_size=1, word_timestamps=True,
            condition_on_previous_text=False, vad_filter=False, temperature=0.0)
        return [Word(w.word, w.start, w.end) for s in segments for w in (s.words or [])]
