"""``clients.speech_ends``: where the speech a client sends pauses, and which pause each
final caption follows (its latency with server-side speech)."""

from __future__ import annotations

import numpy as np

from clients.speech_ends import SpeechEnds, level_dbfs

VOICED = (np.sin(np.arange(3200) / 5) * 8000).astype("<i2").tobytes()
SILENT = np.zeros(3200, dtype="<i2").tobytes()


def test_level_of_silence_and_speech() -> None:
    assert level_dbfs(SILENT) == float("-inf")
    assert -20 < level_dbfs(VOICED) < -10


def test_a_speech_end_is_the_last_voiced_frame_before_a_pause() -> None:
    ends = SpeechEnds()
    for t, frame in enumerate([SILENT, VOICED, VOICED, SILENT, SILENT, VOICED]):
        ends.sent(frame, float(t))
    ends.finish()  # the input ended while voiced: that is a speech end too
    assert ends.ends == [2.0, 5.0]


def test_each_final_follows_a_later_speech_end_per_language() -> None:
    ends = SpeechEnds()
    ends.ends = [2.0, 5.0]
    assert ends.end_before(1.0, "de") is None  # no speech has ended yet
    assert ends.end_before(3.0, "de") == 2.0
    assert ends.end_before(3.1, "ja") == 2.0  # each language's final is timed alike
    assert ends.end_before(4.0, "de") is None  # cut without a pause: not timed
    assert ends.end_before(6.0, "de") == 5.0
