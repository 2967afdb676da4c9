"""VoiceStream on a real engine (espeak-ng): commits spoken in order, faster when behind,
flushed on close, and nothing lost without being counted and reported."""

from __future__ import annotations

import asyncio

import pytest

from app.translation.commits import Commit
from app.voice import espeak
from app.voice.catchup import CatchUp
from app.voice.espeak import EspeakSynthesizer
from app.voice.stream import VoiceChunk, VoiceLoss, VoiceStream
from tests.app.voice.audio import assert_speech

pytestmark = pytest.mark.skipif(espeak.binary() is None,
                                reason="espeak-ng is not installed (make system-deps)")

PHRASES = ["Good morning", " and welcome", " to the conference.", "Today we speak",
           " about voices", " that never fall behind."]


def commits(lang: str = "en") -> list[Commit]:
    """Two segments of three phrases each, as the commit policy makes them."""
    out, text = [], ""
    for i, delta in enumerate(PHRASES):
        segment = i // 3
        if i % 3 == 0:
            text = ""
        text += delta
        out.append(Commit(segment, lang, text, delta, final=i % 3 == 2))
    return out


async def speak(stream: VoiceStream, items: list[Commit]) -> list[VoiceChunk]:
    """Commit everything at once, close, and read every chunk until the stream ends."""
    reader = asyncio.create_task(collect(stream))
    for commit in items:
        stream.committed(commit)
    await stream.close()
    return await reader


async def collect(stream: VoiceStream) -> list[VoiceChunk]:
    return [chunk async for chunk in stream.chunks()]


def test_every_phrase_is_spoken_in_commit_order_and_close_flushes() -> None:
    synth = EspeakSynthesizer("en")
    stream = VoiceStream(synth)
    chunks = asyncio.run(speak(stream, [*commits("de"), *commits("en"),
                                        Commit(2, "en", "", "  ", final=False)]))
    # other languages' commits and blank deltas are not this voice's to speak
    assert [(c.segment, c.final) for c in chunks] == [(0, False), (0, False), (0, True),
                                                      (1, False), (1, False), (1, True)]
    for chunk, phrase in zip(chunks, PHRASES, strict=True):
        assert chunk.lang == "en" and chunk.sample_rate == synth.info.sample_rate
        assert chunk.pcm == synth.synthesize(phrase, chunk.speed)  # this phrase, this speed
        assert_speech(chunk.pcm, chunk.sample_rate, 0.3, 6.0)
    assert stream.stats.phrases == stream.stats.spoken == 6
    assert stream.stats.lost_phrases == 0 and not stream.stats.losses


def test_a_voice_behind_the_speaker_speeds_up_within_bounds() -> None:
    synth = EspeakSynthesizer("en")
    policy = CatchUp(slack_s=1.0, ramp_s=3.0, max_speed=1.5)
    # a clock that stands still: every phrase was committed "now", so each one waits
    # behind all the audio before it, and the voice must catch up
    alone = asyncio.run(speak(VoiceStream(synth, catch_up=policy, clock=lambda: 0.0),
                              commits()[:1]))
    assert [c.speed for c in alone] == [1.0]
    stream = VoiceStream(synth, catch_up=policy, clock=lambda: 0.0)
    chunks = asyncio.run(speak(stream, commits() * 3))
    speeds = [c.speed for c in chunks]
    assert len(chunks) == 18 and speeds[-1] == 1.5
    assert all(1.0 <= s <= 1.5 for s in speeds)
    assert stream.stats.max_speed == 1.5 and stream.stats.lost_phrases == 0
    # at 1.5x a phrase is shorter than the same phrase at the voice's own pace
    assert len(chunks[-1].pcm) < 0.85 * len(synth.synthesize(PHRASES[-1]))


def test_past_the_hard_bound_the_oldest_phrases_are_dropped_and_reported() -> None:
    losses: list[VoiceLoss] = []
    stream = VoiceStream(EspeakSynthesizer("en"), max_pending_s=3.0, on_loss=losses.append)
    items = commits() * 2
    chunks = asyncio.run(speak(stream, items))
    assert losses and {loss.reason for loss in losses} == {"overrun"}
    lost = sum(loss.phrases for loss in losses)
    assert lost == stream.stats.lost_phrases > 0
    assert stream.stats.lost_chars == sum(loss.chars for loss in losses)
    # every committed phrase is either heard or counted as lost: none vanishes
    assert len(chunks) + lost == len(items) == stream.stats.phrases
    # shed down to half the bound: one report covers several phrases, not one per commit
    assert len(losses) < lost
    # what is dropped is the oldest: the last phrase committed is heard
    assert chunks[-1].segment == items[-1].segment and chunks[-1].final


def test_a_phrase_the_engine_cannot_speak_is_reported_and_the_voice_goes_on() -> None:
    losses: list[VoiceLoss] = []
    broken = EspeakSynthesizer("en", executable="/nonexistent/espeak-ng")
    stream = VoiceStream(broken, on_loss=losses.append)
    assert asyncio.run(speak(stream, commits()[:2])) == []
    assert [(loss.reason, loss.phrases) for loss in losses] == [("failed", 1)] * 2
    assert stream.stats.lost_chars == len(PHRASES[0]) + len(PHRASES[1])


def test_abort_and_late_commits_are_counted_as_closed() -> None:
    async def main() -> VoiceStream:
        losses: list[VoiceLoss] = []
        stream = VoiceStream(EspeakSynthesizer("en"), on_loss=losses.append)
        for commit in commits():
            stream.committed(commit)
        stream.abort()  # the consumer left before anything was spoken
        await asyncio.sleep(0)
        stream.committed(commits()[0])  # after the end: lost, and said so
        assert [c async for c in stream.chunks()] == []
        assert sum(loss.phrases for loss in losses) == 7
        assert {loss.reason for loss in losses} == {"closed"}
        return stream

    stream = asyncio.run(main())
    assert stream.stats.lost_phrases == 7 and stream.stats.spoken == 0


def test_metrics_count_what_was_spoken_what_it_cost_and_what_was_lost() -> None:
    """The server's /metrics callbacks: every chunk's seconds, its synthesis time and its
    delay; every lost phrase by reason; and they add up to the stream's own stats."""
    from app.api.metrics import Metrics
    from app.voice.stream import VoiceMetrics

    spoken: list[tuple[str, str, float, float, float]] = []
    lost: list[tuple[str, int]] = []
    watch = VoiceMetrics(spoken=lambda *args: spoken.append(args),
                         lost=lambda reason, n: lost.append((reason, n)))
    stream = VoiceStream(EspeakSynthesizer("en"), max_pending_s=3.0, metrics=watch)
    chunks = asyncio.run(speak(stream, commits() * 2))
    assert len(spoken) == len(chunks) == stream.stats.spoken
    assert {(lang, engine) for lang, engine, *_ in spoken} == {("en", "espeak-ng")}
    assert abs(sum(s[2] for s in spoken) - stream.stats.spoken_s) < 1e-6
    assert all(s[3] > 0 and s[4] >= 0 for s in spoken)
    assert sum(n for _, n in lost) == stream.stats.lost_phrases > 0
    # ... and the server's registry turns them into its series
    metrics = Metrics()
    hooks = metrics.voice_metrics()
    for args in spoken:
        hooks.spoken(*args)
    for reason, n in lost:
        hooks.lost(reason, n)
    text = metrics.render().decode()
    audio = metrics.voice_audio_seconds.labels("en", "espeak-ng")._value.get()
    assert abs(audio - stream.stats.spoken_s) < 1e-6
    assert metrics.voice_lost_phrases.labels("overrun")._value.get() == \
        stream.stats.lost_phrases
    assert 'livetrans_voice_audio_seconds_total{engine="espeak-ng",lang="en"}' in text
    assert "livetrans_voice_delay_seconds_count" in text


def test_a_phrase_is_synthesised_with_a_core_lent_and_the_core_comes_back() -> None:
    """A voice computes on the CPU: the translation engine leaves it a core meanwhile
    (``app.cores.CORE_LOANS``), and has it back once the phrase is spoken."""
    from app.cores import CORE_LOANS

    seen: list[int] = []
    before = CORE_LOANS.now  # another test's server may still hold one

    class Watching(EspeakSynthesizer):
        def synthesize(self, text: str, speed: float = 1.0) -> bytes:
            seen.append(CORE_LOANS.now)
            return super().synthesize(text, speed)

    chunks = asyncio.run(speak(VoiceStream(Watching("en")), commits("en")[:2]))
    assert len(chunks) == 2 and seen and min(seen) >= before + 1
    assert CORE_LOANS.now == before
