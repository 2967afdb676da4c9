"""The catch-up policy: its own pace near the speaker, faster behind, never past its bound."""

from __future__ import annotations

import math

import pytest

from app.voice.catchup import CatchUp, speech_s


def test_speed_rises_with_lag_within_bounds() -> None:
    policy = CatchUp(slack_s=1.0, ramp_s=4.0, max_speed=1.5)
    assert policy.speed(0.0) == policy.speed(1.0) == policy.speed(-3) == 1.0
    assert policy.speed(3.0) == pytest.approx(1.25)
    assert policy.speed(5.0) == policy.speed(500.0) == 1.5
    assert policy.speed(math.nan) == 1.0
    speeds = [policy.speed(lag / 4) for lag in range(40)]
    assert speeds == sorted(speeds)


def test_a_policy_past_the_engines_bound_is_refused() -> None:
    for bad in ({"max_speed": 3.0}, {"max_speed": 0.8}, {"ramp_s": 0}, {"slack_s": -1}):
        with pytest.raises(ValueError):
            CatchUp(**bad)


def test_speech_seconds_count_cjk_characters_as_syllables() -> None:
    assert speech_s("a" * 14) == pytest.approx(1.0)
    assert speech_s("日本語の文" + "です。") > speech_s("nihongo")
