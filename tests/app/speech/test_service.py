"""The recogniser that serves many speakers (``app.speech.service``): admission, the
decodes finals wait for before other speakers' partials, thinned partials, and a long
utterance cut between words.

The transcriber and the voice detector are the test doubles of ``test_recognizer.py`` (a
word per half second of tone; speech wherever the signal is loud): they test the
scheduling, not recognition; Whisper on real speech is ``test_whisper_stream.py``.
"""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from app.cores import CoreLoans
from app.speech.agreement import Word
from app.speech.recognizer import SAMPLE_RATE, SpeechEvent
from app.speech.service import SpeechBusyError, SpeechRecognition
from app.speech.whisper_stream import StreamingWhisper
from tests.app.speech.test_recognizer import LoudnessVad

WAIT_S = 60  # a bound against hanging, never a latency


class CountingTranscriber:
    """A word per half second of loud audio (``w0``, ``w1``...), each 0.4 s long; logs
    each decode as (name, seconds heard) and may hold a decode at a gate."""

    def __init__(self, name: str, log: list[tuple[str, float]],
                 gate: threading.Event | None = None) -> None:
        self.name, self.log, self.gate = name, log, gate
        self.entered = threading.Event()

    def transcribe(self, audio: np.ndarray, language: str) -> list[Word]:
        self.entered.set()
        if self.gate is not None:
            self.gate.wait(WAIT_S)
        self.log.append((self.name, len(audio) / SAMPLE_RATE))
        loud = np.flatnonzero(np.abs(audio) > 0.1)
        if not len(loud):
            return []
        n = int((loud[-1] - loud[0]) / (SAMPLE_RATE / 2)) + 1
        return [Word(f" w{k}", k * 0.5, k * 0.5 + 0.4) for k in range(n)]


def _stream(name: str, log: list, gate: threading.Event | None = None,
            **kwargs: float) -> StreamingWhisper:
    return StreamingWhisper(transcriber=CountingTranscriber(name, log, gate),
                            vad=LoudnessVad(), **kwargs)


def _tone(seconds: float) -> np.ndarray:
    return np.full(int(seconds * SAMPLE_RATE), 0.5, dtype=np.float32)


def _silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * SAMPLE_RATE), dtype=np.float32)


def test_a_final_goes_before_the_partials_of_other_speakers() -> None:
    """Three speakers wait while a decode runs: the one whose speech ended is decoded
    first, though it asked last."""
    log: list[tuple[str, float]] = []
    gate = threading.Event()
    speech = SpeechRecognition(behind_s=WAIT_S)
    busy = _stream("busy", log, gate)
    talking = [_stream(f"talking{i}", log) for i in range(2)]
    ended = _stream("ended", log)

    async def main() -> list:
        first = asyncio.create_task(speech.feed(busy, _tone(1.5)))  # a partial, held
        await asyncio.to_thread(busy.transcriber.entered.wait, WAIT_S)
        partials = [asyncio.create_task(speech.feed(s, _tone(1.5))) for s in talking]
        await asyncio.sleep(0.05)
        final = asyncio.create_task(speech.feed(ended, np.concatenate(
            [_tone(1.5), _silence(1.0)])))
        await asyncio.sleep(0.05)
        gate.set()
        return await asyncio.wait_for(asyncio.gather(first, *partials, final), WAIT_S)

    try:
        results = asyncio.run(main())
    finally:
        speech.close()
    order = [name for name, _ in log]
    assert order[0] == "busy" and order[1] == "ended", order
    assert {"talking0", "talking1"} <= set(order[2:])
    assert [e.kind for e in results[-1]] == ["final"]
    # its final says it waited behind the partial decode running when it asked, and
    # behind no decode a final waits for
    timing = results[-1][0].timing
    assert timing is not None and timing.asked <= timing.began <= timing.ended
    assert 0 < timing.behind_partials_s <= timing.began - timing.asked + 1e-6
    assert timing.behind_finals_s == 0


def test_partials_are_thinned_while_the_recogniser_is_behind_and_finals_are_not() -> None:
    log: list[tuple[str, float]] = []
    speech = SpeechRecognition(behind_s=0.0)  # every turn counts as late
    talking, ended = _stream("talking", log), _stream("ended", log)

    async def main() -> tuple[list, list]:
        partial = await speech.feed(talking, _tone(1.5))
        final = await speech.feed(ended, np.concatenate([_tone(1.5), _silence(1.0)]))
        return partial, final

    try:
        partial, final = asyncio.run(asyncio.wait_for(main(), WAIT_S))
    finally:
        speech.close()
    assert partial == [] and [e.kind for e in final] == ["final"]
    assert [name for name, _ in log] == ["ended"]  # the thinned partial cost no decode
    assert len(talking.buffer) == int(1.5 * SAMPLE_RATE)  # its audio waits for the next


def test_a_long_utterance_is_cut_after_a_finished_word() -> None:
    log: list[tuple[str, float]] = []
    stream = _stream("long", log, max_segment_s=3.0, step_s=10.0)
    events = []
    for _ in range(16):  # 4 s of speech without a pause, in 250 ms frames
        events += stream.feed(_tone(0.25))
    finals = [e for e in events if e.kind == "final"]
    assert len(finals) == 1
    # words end at 0.4, 0.9, ... s; the last to end 0.6 s before the 3 s cut is w4 (2.4 s)
    assert finals[0].text == "w0 w1 w2 w3 w4"
    # the buffer now starts between w4 (ends 2.4 s) and w5 (starts 2.5 s): w5 is whole
    heard_s = log[-1][1]
    cut_s = heard_s - 2.45
    assert abs(len(stream.buffer) / SAMPLE_RATE - (4.0 - 2.45)) < 0.3, (heard_s, cut_s)


def test_speakers_beyond_the_limit_are_busy_until_one_leaves(monkeypatch) -> None:
    speech = SpeechRecognition(max_speakers=1)
    monkeypatch.setattr(speech, "_load", lambda: object())  # no Whisper needed to count

    async def main() -> None:
        first = await speech.open_stream("en")
        with pytest.raises(SpeechBusyError, match="--max-audio-speakers"):
            await speech.open_stream("en")
        speech.close_stream(first)
        second = await speech.open_stream("en")
        assert speech.speakers == 1 and second.partial_share == 0.5
        del second  # a stream its connection dropped (a start that failed) leaves too
        assert speech.speakers == 0

    try:
        asyncio.run(main())
    finally:
        speech.close()


def test_a_failure_outside_any_turn_ends_the_waiting_turns_and_the_thread_goes_on(
        monkeypatch) -> None:
    """A bug in the scheduling itself fails the turns waiting then, never strands them."""
    import app.speech.service as service

    log: list[tuple[str, float]] = []
    speech = SpeechRecognition(behind_s=WAIT_S)
    calls = {"n": 0}
    real_choose = service.choose

    def failing_once(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("a bug in the decode order")
        return real_choose(*args, **kwargs)

    monkeypatch.setattr(service, "choose", failing_once)

    async def main() -> list:
        with pytest.raises(RuntimeError, match="decode order"):
            await asyncio.wait_for(speech.feed(_stream("a", log), _tone(1.5)), WAIT_S)
        ended = _stream("b", log)
        return await asyncio.wait_for(
            speech.feed(ended, np.concatenate([_tone(1.5), _silence(1.0)])), WAIT_S)

    try:
        events = asyncio.run(main())
    finally:
        speech.close()
    assert [e.kind for e in events] == ["final"]


def _frames(audio: np.ndarray, frame_s: float = 0.25) -> list[np.ndarray]:
    step = int(frame_s * SAMPLE_RATE)
    return [audio[i:i + step] for i in range(0, len(audio), step)]


def test_each_final_says_where_its_speech_ended_and_when_it_was_decoded() -> None:
    """Two sentences in 250 ms frames, one turn a frame: each final knows where in the
    stream's audio its speech ended, how much it had heard then (the endpoint's silence,
    none of it late: the recogniser was idle), and its turn's times on the thread."""
    log: list[tuple[str, float]] = []
    speech = SpeechRecognition(behind_s=WAIT_S)
    stream = _stream("one", log)
    audio = np.concatenate([_tone(1.5), _silence(1.0), _tone(1.5), _silence(1.0)])

    async def main() -> list:
        events = []
        for frame in _frames(audio):
            events += await speech.feed(stream, frame)
        return events

    try:
        events = asyncio.run(asyncio.wait_for(main(), WAIT_S))
    finally:
        speech.close()
    finals = [e for e in events if e.kind == "final"]
    assert len(finals) == 2
    for final, end_s in zip(finals, (1.5, 4.0), strict=True):
        t = final.timing
        assert t is not None and t.ended_by == "silence"
        assert t.speech_end_s == pytest.approx(end_s, abs=0.02)  # of the stream, not the buffer
        assert t.heard_s >= t.speech_end_s + stream.endpoint_silence_s
        assert t.late_s == 0
        assert t.asked <= t.began <= t.ended
        assert 0 <= t.behind_partials_s + t.behind_finals_s <= t.began - t.asked + 1e-6
    assert all(e.timing is None for e in events if e.kind == "partial")


def test_audio_that_waited_for_a_busy_recogniser_is_late_not_endpoint_silence() -> None:
    """Frames of 250 ms, then two seconds at once (what a turn carries after a long
    wait): the endpoint needed 0.6 s of silence and one look of the VAD; the rest of what
    it heard after the speech came late."""
    stream = _stream("behind", [])
    for frame in _frames(_tone(1.5)):
        stream.feed(frame)
    (final,) = [e for e in stream.feed(_silence(2.0)) if e.kind == "final"]
    t = final.timing
    assert t is not None and t.ended_by == "silence"
    assert t.speech_end_s == pytest.approx(1.5, abs=0.02)
    assert t.heard_s == pytest.approx(3.5)
    assert t.late_s == pytest.approx(3.5 - 1.5 - stream.endpoint_silence_s - 0.25, abs=0.02)
    # audio in one piece is a client's frame: no look could have come sooner, none late
    whole = _stream("whole", [])
    (final,) = whole.feed(np.concatenate([_tone(1.5), _silence(2.0)]))
    assert final.timing.late_s == 0 and final.timing.heard_s == pytest.approx(3.5)


def test_a_final_at_stop_and_a_recogniser_fed_whole_say_what_they_know() -> None:
    stopped = _stream("stopped", [])
    stopped.feed(_silence(3.0))  # dropped as it comes: still counts in the stream's audio
    for frame in _frames(_tone(1.0)):
        stopped.feed(frame)
    (final,) = stopped.flush()
    assert final.timing.ended_by == "stop" and final.timing.late_s == 0
    assert final.timing.speech_end_s == pytest.approx(4.0, abs=0.02)
    assert final.timing.heard_s == pytest.approx(4.0, abs=0.02)

    class Whole:  # a plain Recognizer: fed whole, says nothing of its audio
        segment = 0

        def feed(self, samples: np.ndarray) -> list[SpeechEvent]:
            return [SpeechEvent("final", 0, "hello")]

        def flush(self) -> list[SpeechEvent]:
            return []

    speech = SpeechRecognition()
    try:
        (event,) = asyncio.run(asyncio.wait_for(speech.feed(Whole(), _tone(0.5)), WAIT_S))
    finally:
        speech.close()
    t = event.timing
    assert t is not None and t.ended_by is None and t.speech_end_s is None
    assert t.asked <= t.began <= t.ended


class HeldAfterFirst(CountingTranscriber):
    """A ``CountingTranscriber`` whose decodes after the first wait at ``gate``."""

    def transcribe(self, audio: np.ndarray, language: str) -> list[Word]:
        if self.log:
            self.entered.set()
            self.gate.wait(WAIT_S)
        return CountingTranscriber(self.name, self.log).transcribe(audio, language)


def test_a_final_leaves_as_soon_as_it_is_decoded_not_when_its_turn_ends() -> None:
    """A backlog of two sentences in one turn: the first final reaches the speaker while
    the second sentence's decode is still held, then the second follows, in order."""
    log: list[tuple[str, float]] = []
    gate = threading.Event()
    transcriber = HeldAfterFirst("backlog", log, gate)
    stream = StreamingWhisper(transcriber=transcriber, vad=LoudnessVad())
    speech = SpeechRecognition(behind_s=WAIT_S)
    backlog = np.concatenate([_tone(1.5), _silence(1.0), _tone(1.5), _silence(1.0)])

    async def main() -> tuple[list, list, list]:
        handed: list[tuple[list[SpeechEvent], int]] = []
        arrived = asyncio.Event()

        def on_events(events: list[SpeechEvent]) -> None:
            handed.append((events, len(log)))  # with the decodes that had ended by then
            arrived.set()

        turn = asyncio.create_task(speech.feed(stream, backlog, on_events))
        await asyncio.wait_for(arrived.wait(), WAIT_S)
        first = list(handed)
        await asyncio.to_thread(transcriber.entered.wait, WAIT_S)
        assert not turn.done()  # the turn goes on: its next decode is held
        gate.set()
        returned = await asyncio.wait_for(turn, WAIT_S)
        return first, handed, returned

    try:
        first, handed, returned = asyncio.run(main())
    finally:
        speech.close()
    assert [([e.kind for e in events], decoded) for events, decoded in first] == \
        [(["final"], 1)]
    assert [[(e.kind, e.segment, e.text) for e in events] for events, _ in handed] == [
        [("final", 0, "w0 w1 w2")], [("final", 1, "w0 w1 w2")]]
    assert returned == [] and len(log) == 2
    one, two = (events[0].timing for events, _ in handed)
    assert one.ended <= two.began  # the second decode ran after the first final left
    assert one.speech_end_s == pytest.approx(1.5, abs=0.02)
    assert two.speech_end_s == pytest.approx(4.0, abs=0.02)


def test_an_endpoint_is_seen_at_the_first_frame_its_silence_reaches() -> None:
    """200 ms frames, so the VAD's 250 ms step looks at every other frame: once the buffer
    holds speech, its tail is looked at in between, and the final is decided at the first
    frame whose end lies ``endpoint_silence_s`` after the speech (2.2 s), not at the next
    look (2.4 s)."""
    log: list[tuple[str, float]] = []
    stream = _stream("frames", log)
    assert stream.vad_step_s > 0.2
    events = []
    for frame in _frames(np.concatenate([_tone(1.5), _silence(1.5)]), frame_s=0.2):
        events += stream.feed(frame)
    (final,) = [e for e in events if e.kind == "final"]
    t = final.timing
    assert t.ended_by == "silence" and t.speech_end_s == pytest.approx(1.5)
    first = np.ceil(round((t.speech_end_s + stream.endpoint_silence_s) / 0.2, 6)) * 0.2
    assert t.heard_s == pytest.approx(first) == pytest.approx(2.2)
    assert t.late_s == 0
    # while it is silent, no look at the tail: the buffer holds no speech
    quiet = _stream("quiet", [])
    for frame in _frames(_silence(3.0), frame_s=0.2):
        quiet.feed(frame)
        assert not quiet.speaking


def test_a_speaker_that_stopped_waiting_is_handed_nothing() -> None:
    """A turn cancelled while its final decodes (its speaker left): the final is dropped,
    as a cancelled turn's result is, and the thread serves the next speaker."""
    log: list[tuple[str, float]] = []
    gate = threading.Event()
    left = _stream("left", log, gate)
    speech = SpeechRecognition(behind_s=WAIT_S)
    handed: list[SpeechEvent] = []

    async def main() -> list:
        turn = asyncio.create_task(speech.feed(
            left, np.concatenate([_tone(1.5), _silence(1.0)]), handed.extend))
        await asyncio.to_thread(left.transcriber.entered.wait, WAIT_S)
        turn.cancel()
        await asyncio.sleep(0)  # the cancel reaches the turn
        gate.set()
        after: list[SpeechEvent] = []
        await asyncio.wait_for(speech.feed(
            _stream("next", log), np.concatenate([_tone(1.5), _silence(1.0)]), after.extend),
            WAIT_S)
        await asyncio.sleep(0)
        return after

    try:
        after = asyncio.run(main())
    finally:
        speech.close()
    assert [name for name, _ in log] == ["left", "next"]  # the left one's decode did end
    assert handed == [] and [e.kind for e in after] == ["final"]


def test_a_decode_lends_the_engine_the_recognisers_cores_while_it_runs() -> None:
    """Each decode computes on ``threads`` cores the translation engine then leaves to it
    (``CoreLoans``), and gives them back when it ends; a recogniser on a GPU lends none."""
    seen: list[int] = []
    loans = CoreLoans()

    class Watching(CountingTranscriber):
        def transcribe(self, audio: np.ndarray, language: str) -> list[Word]:
            seen.append(loans.now)
            return super().transcribe(audio, language)

    speech = SpeechRecognition(threads=2, behind_s=WAIT_S, core_loans=loans)
    stream = StreamingWhisper(transcriber=Watching("one", []), vad=LoudnessVad())
    audio = np.concatenate([_tone(1.5), _silence(1.0)])

    async def main() -> None:
        for frame in _frames(audio):
            await speech.feed(stream, frame)

    try:
        asyncio.run(asyncio.wait_for(main(), WAIT_S))
    finally:
        speech.close()
    assert seen and set(seen) == {2}
    assert loans.now == 0
