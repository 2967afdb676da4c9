"""Where speech ends in the audio ``livetrans caption --audio`` sends, and when.

When the server recognises the speech, the client never sends a final: the server cuts
segments where the speaker pauses. So the latency a listener feels is timed from the end
of the speech the client sent (the last voiced frame before a pause, on the wall clock when
it was sent) to the final caption that follows it. Voiced means louder than
``SILENCE_DBFS``; a file sent faster than real time has its speech ends close together,
and the figure then includes the time the server's recogniser takes to catch up.
"""

from __future__ import annotations

import bisect
import math

import numpy as np

SILENCE_DBFS = -45.0  # a 200 ms frame at or below this RMS level counts as a pause


def level_dbfs(pcm: bytes) -> float:
    """RMS level of s16le mono PCM, dB relative to full scale (-inf for silence)."""
    samples = np.frombuffer(pcm[: len(pcm) // 2 * 2], dtype="<i2")
    if not len(samples):
        return -math.inf
    rms = float(np.sqrt(np.mean(samples.astype(np.float64) ** 2)))
    return 20 * math.log10(rms / 32768.0) if rms > 0 else -math.inf


class SpeechEnds:
    """The send times of the last voiced frame before each pause (and before the end)."""

    def __init__(self, silence_dbfs: float = SILENCE_DBFS) -> None:
        self.silence_dbfs = silence_dbfs
        self.ends: list[float] = []  # ascending: frames are sent in order
        self._voiced_at: float | None = None
        # per caption language, the speech end its previous final was timed from
        self._used: dict[str | None, float] = {}

    def sent(self, pcm: bytes, at: float) -> None:
        """A frame left at ``at`` (``time.perf_counter``)."""
        if level_dbfs(pcm) > self.silence_dbfs:
            self._voiced_at = at
        else:
            self.finish()

    def finish(self) -> None:
        """The input ended (or paused): speech in progress ends at its last voiced frame."""
        if self._voiced_at is not None:
            self.ends.append(self._voiced_at)
            self._voiced_at = None

    def end_before(self, at: float, lang: str | None = None) -> float | None:
        """The speech end a final caption of ``lang`` arriving at ``at`` follows: the latest
        one sent before it and after the one the language's previous final followed; None
        if there is none (the server cut a segment without a pause)."""
        i = bisect.bisect_right(self.ends, at)
        if i == 0:
            return None
        end = self.ends[i - 1]
        if end <= self._used.get(lang, -math.inf):
            return None
        self._used[lang] = end
        return end
