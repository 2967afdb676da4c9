"""``clients.speech_ends``: where the speech a client sends pauses, and which pause each
final caption follows (its latency with server-side speech)."""

from __future__ import annotations

import numpy as np

from clients.speech_ends import SpeechEnds, level_dbfs

VOICED = (np.sin(np.arange(3200) / 5) * 8000).astype("<i2").tobytes()  # 200 ms at 16 kHz
SILENT = np.zeros(3200, dtype="<i2").tobytes()


def test_level_of_silence_and_speech() -> None:
    assert level_dbfs(SILENT) == float("-inf")
    assert -20 < level_dbfs(VOICED) < -10


def test_a_speech_end_is_the_last_voiced_frame_before_a_long_pause() -> None:
    ends = SpeechEnds()
    frames = [SILENT, VOICED, VOICED, SILENT, VOICED,  # a 0.2 s gap between words
              SILENT, SILENT, SILENT, SILENT, VOICED]  # a 0.8 s pause: the sentence ended
    for t, frame in enumerate(frames):
        ends.sent(frame, float(t))
    assert ends.ends == [4.0]
    ends.finish()  # the input ended while voiced: that is a speech end too
    assert ends.ends == [4.0, 9.0]


def test_finals_follow_the_speech_ends_in_order_per_language() -> None:
    ends = SpeechEnds()
    ends.ends = [2.0, 5.0]
    assert ends.end_before(1.0, "de") is None  # no speech had ended yet
    # a late caption: both sentences were sent before the first final came
    assert ends.end_before(6.0, "de") == 2.0
    assert ends.end_before(6.1, "ja") == 2.0  # each language's finals are timed alike
    assert ends.end_before(7.0, "de") == 5.0
    assert ends.end_before(8.0, "de") is None  # more finals than pauses: not timed
