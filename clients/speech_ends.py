"""Where speech ends in the audio ``livetrans caption --audio`` sends, and when.

When the server recognises the speech, the client never sends a final: the server ends a
segment where the speaker pauses. So the latency a listener feels is timed from the end of
the speech the client sent (the last voiced frame before a pause as long as the server's
endpoint, on the wall clock when it was sent) to the final caption of that segment: the
n-th final of a language follows the n-th speech end. Voiced means louder than
``SILENCE_DBFS``. A file sent faster than real time has its speech ends close together, and
the figure then includes the time the server's recogniser takes to catch up with it;
``--realtime`` paces it as a live talk."""

from __future__ import annotations

import math

import numpy as np

SILENCE_DBFS = -45.0  # a frame at or below this RMS level is silent
# a pause this long ends a sentence: the server's recogniser ends a segment after 0.6 s of
# silence (app.speech.whisper_stream), so shorter gaps between words are not counted
MIN_PAUSE_S = 0.6


def level_dbfs(pcm: bytes) -> float:
    """RMS level of s16le mono PCM, dB relative to full scale (-inf for silence)."""
    samples = np.frombuffer(pcm[: len(pcm) // 2 * 2], dtype="<i2")
    if not len(samples):
        return -math.inf
    rms = float(np.sqrt(np.mean(samples.astype(np.float64) ** 2)))
    return 20 * math.log10(rms / 32768.0) if rms > 0 else -math.inf


class SpeechEnds:
    """The send times of the last voiced frame before each pause (and before the end)."""

    def __init__(self, silence_dbfs: float = SILENCE_DBFS, min_pause_s: float = MIN_PAUSE_S,
                 rate: int = 16000) -> None:
        self.silence_dbfs, self.min_pause_s, self.rate = silence_dbfs, min_pause_s, rate
        self.ends: list[float] = []  # ascending: frames are sent in order
        self._voiced_at: float | None = None
        self._silent_s = 0.0  # silence sent since the last voiced frame
        # per caption language, how many speech ends its finals have been timed from
        self._used: dict[str | None, int] = {}

    def sent(self, pcm: bytes, at: float) -> None:
        """A frame of s16le mono PCM left at ``at`` (``time.perf_counter``)."""
        if level_dbfs(pcm) > self.silence_dbfs:
            self._voiced_at, self._silent_s = at, 0.0
            return
        self._silent_s += len(pcm) // 2 / self.rate
        if self._silent_s >= self.min_pause_s:
            self.finish()

    def finish(self) -> None:
        """The input ended (or paused long enough): the speech in progress ended at its
        last voiced frame."""
        if self._voiced_at is not None:
            self.ends.append(self._voiced_at)
            self._voiced_at = None

    def end_before(self, at: float, lang: str | None = None) -> float | None:
        """The speech end a final caption of ``lang`` arriving at ``at`` follows: the
        earliest one its language's finals have not been timed from yet (segments end at
        pauses, in order, however late their captions come), if it was sent before ``at``;
        None otherwise (the server cut a segment without a pause)."""
        used = self._used.get(lang, 0)
        if used >= len(self.ends) or self.ends[used] > at:
            return None
        self._used[lang] = used + 1
        return self.ends[used]
