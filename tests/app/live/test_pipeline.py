"""The live fan-out and its per-language pipelines with a fake translator and publisher (no
model, no socket): every final answered once per language, stale partials dropped before
they cost a forward pass, a final stopping a running partial, one language's failure named."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace

from app.engine.engine import GenerationResult
from app.live.pipeline import FanOut, LanguagePipeline
from app.live.queue import Update
from app.live.services import LiveMetrics
from app.translation.sessions import Session
from app.translation.translator import Hints, JobControl, TranslateOptions, TranslationOutcome


class FakeTranslator:
    """Translates by upper-casing; ``gate`` (when set) holds jobs "in the engine queue"
    until released; ``fail`` names languages whose jobs raise."""

    def __init__(self) -> None:
        self.gate: asyncio.Event | None = None
        self.fail: set[str] = set()
        self.calls: list[tuple[str, str, bool]] = []

    async def translate(self, text, opts, *, is_final, job: JobControl,  # noqa: ANN001
                        **_) -> TranslationOutcome:
        cancel, started = job.cancel, job.started
        assert cancel is not None and started is not None
        self.calls.append((opts.target_lang, text, is_final))
        if self.gate is not None and not is_final:
            await self.gate.wait()
        if cancel.is_set():
            from app.engine.worker import JobCancelledError

            raise JobCancelledError()
        started.set()
        await asyncio.sleep(0)
        if opts.target_lang in self.fail:
            raise RuntimeError("engine failure")
        reason = "cancelled" if cancel.is_set() else "stop"
        result = GenerationResult(tokens=[1, 2], text=text.upper(), finish_reason=reason,
                                  prompt_tokens=3, prompt_tokens_cached=0)
        return TranslationOutcome(result=result, text=f"{opts.target_lang}:{text.upper()}",
                                  display_text=f"{opts.target_lang}:{text.upper()}", revision=0,
                                  session_id=None, is_final=is_final)


class FakePublisher:
    def __init__(self) -> None:
        self.captions: list[dict] = []
        self.errors: list[dict] = []

    async def caption(self, payload: dict) -> None:
        self.captions.append(payload)

    async def error(self, code: str, message: str, **where) -> None:
        self.errors.append({"code": code, **where})


def _fan(langs=("de", "ja")) -> tuple[FanOut, FakeTranslator, FakePublisher]:
    translator, publisher = FakeTranslator(), FakePublisher()
    seqs = iter(range(1_000_000))
    # the translator is read when called, as ``ServerState.live_services`` does
    services = SimpleNamespace(translate=lambda *a, **kw: translator.translate(*a, **kw),
                               metrics=LiveMetrics(), next_seq=lambda: next(seqs))
    pipelines = [LanguagePipeline(lang, Session(session_id=f"s-{lang}"),
                                  TranslateOptions(target_lang=lang), "stable", lambda ids: "")
                 for lang in langs]
    return FanOut(services, publisher, pipelines), translator, publisher


def _one_running_then(first: Update, second: Update,
                      held: Callable[[dict], bool] = lambda kw: not kw["is_final"],
                      ) -> tuple[FakePublisher, list[dict]]:
    """``first`` submitted and held running in the engine (the jobs ``held`` picks by
    their keywords), then ``second``; every caption once both are answered, and each job's
    keywords in order."""

    async def scenario() -> tuple[FakePublisher, list[dict]]:
        fan, translator, publisher = _fan(("de",))
        hold = asyncio.Event()
        original = translator.translate
        jobs: list[dict] = []

        async def slow(text, opts, **kw):  # noqa: ANN001, ANN202
            jobs.append(kw)
            if held(kw):
                kw["job"].started.set()  # running in the engine
                await hold.wait()
            return await original(text, opts, **kw)

        translator.translate = slow
        runner = asyncio.create_task(fan.run())
        fan.submit(first)
        await asyncio.sleep(0.01)
        fan.submit(second)
        hold.set()
        fan.stop()
        await asyncio.wait_for(runner, 10)
        return publisher, jobs

    return asyncio.run(scenario())


def _finals(publisher: FakePublisher) -> list[tuple[int, str]]:
    return [(c["segment"], c["lang"]) for c in publisher.captions if c["final"]]


def test_every_final_gets_one_caption_per_language_in_order() -> None:
    async def scenario() -> FakePublisher:
        fan, _, publisher = _fan()
        runner = asyncio.create_task(fan.run())
        for update in (Update(0, "good", False), Update(0, "good morning", False),
                       Update(0, "good morning all", True), Update(1, "next", False),
                       Update(1, "next slide", True)):
            fan.submit(update)
        fan.stop()
        await asyncio.wait_for(runner, 10)
        return publisher

    publisher = asyncio.run(scenario())
    assert _finals(publisher) == [(0, "de"), (0, "ja"), (1, "de"), (1, "ja")]
    assert not publisher.errors
    final0 = [c for c in publisher.captions if c["final"] and c["segment"] == 0]
    assert {c["text"] for c in final0} == {"de:GOOD MORNING ALL", "ja:GOOD MORNING ALL"}
    assert all(c["revision"] >= 1 for c in publisher.captions)
    assert not [c for c in publisher.captions if "speech" in c["stats"]]  # typed finals


def test_a_recognised_final_carries_its_speech_timings_in_every_language() -> None:
    async def scenario() -> FakePublisher:
        fan, _, publisher = _fan()
        runner = asyncio.create_task(fan.run())
        fan.submit(Update(0, "hello", True, speech={"asr_decode_ms": 12.5}))
        fan.stop()
        await asyncio.wait_for(runner, 10)
        return publisher

    publisher = asyncio.run(scenario())
    assert [c["stats"]["speech"] for c in publisher.captions] == [{"asr_decode_ms": 12.5}] * 2


def test_a_waiting_partial_made_stale_is_dropped_before_it_runs() -> None:
    async def scenario() -> tuple[FanOut, FakeTranslator, FakePublisher]:
        fan, translator, publisher = _fan()
        translator.gate = asyncio.Event()
        runner = asyncio.create_task(fan.run())
        fan.submit(Update(0, "first guess", False))
        await asyncio.sleep(0.01)  # its jobs wait at the gate, not begun
        fan.submit(Update(0, "second guess", False))
        await asyncio.sleep(0.01)
        translator.gate.set()
        fan.submit(Update(0, "second guess final", True))
        fan.stop()
        await asyncio.wait_for(runner, 10)
        return fan, translator, publisher

    fan, translator, publisher = asyncio.run(scenario())
    assert fan.superseded >= 1
    assert not [c for c in publisher.captions if c["source"] == "first guess"]
    assert _finals(publisher) == [(0, "de"), (0, "ja")]


def test_a_final_stops_a_running_partial_and_is_answered() -> None:
    publisher, _ = _one_running_then(Update(3, "a running partial", False),
                                     Update(3, "a running partial, final", True))
    assert [c["source"] for c in publisher.captions] == ["a running partial, final"]


def test_one_language_failing_is_named_and_the_other_is_captioned() -> None:
    async def scenario() -> FakePublisher:
        fan, translator, publisher = _fan()
        translator.fail = {"ja"}
        runner = asyncio.create_task(fan.run())
        fan.submit(Update(7, "thank you", True))
        fan.stop()
        await asyncio.wait_for(runner, 10)
        return publisher

    publisher = asyncio.run(scenario())
    assert _finals(publisher) == [(7, "de")]
    assert len(publisher.errors) == 1
    error = publisher.errors[0]
    assert error["segment"] == 7 and error["final"] is True and error["lang"] == "ja"


PIECES = {1: b" Der", 2: b" Hund", 4: b" l\xc3\xa4uft", 5: b".", 6: b" schnell", 7: b" Die",
          8: b" Katze"}


class AppendTranslator:
    """Answers each update with the next scripted output and records the ``forced``
    prefix it was asked for."""

    def __init__(self, outputs: list[list[int]]) -> None:
        self.outputs = outputs
        self.forced: list[list[int]] = []

    async def translate(self, text, opts, *, is_final, hints: Hints,  # noqa: ANN001
                        job: JobControl, **_) -> TranslationOutcome:
        self.forced.append(list(hints.forced))
        job.started.set()
        tokens = self.outputs.pop(0)
        out = b"".join(PIECES[t] for t in tokens).decode().strip()
        result = GenerationResult(tokens=tokens, text=out, finish_reason="stop",
                                  prompt_tokens=3, prompt_tokens_cached=0)
        return TranslationOutcome(result=result, text=out, display_text=out, revision=0,
                                  session_id=None, is_final=is_final)


class AppendPublisher(FakePublisher):
    def __init__(self) -> None:
        super().__init__()
        self.frames: list[tuple[str, object]] = []

    async def caption(self, payload: dict) -> None:
        await super().caption(payload)
        self.frames.append(("caption", payload))

    async def commit(self, commit) -> None:  # noqa: ANN001
        self.frames.append(("commit", commit))


def test_append_commits_are_forced_and_the_committed_prefix_wins_over_the_final() -> None:
    # the final diverges from what was committed ("Die Katze ..."): committed words stay
    translator = AppendTranslator([[1, 2, 5], [1, 2, 4, 5], [1, 2, 4, 6, 5],
                                   [7, 8, 4, 6, 5]])
    publisher = AppendPublisher()
    services = SimpleNamespace(translate=translator.translate, metrics=LiveMetrics(),
                               next_seq=iter(range(100)).__next__)
    pipeline = LanguagePipeline("de", Session(session_id="s"),
                                TranslateOptions(target_lang="de", mask_k=1), "mask-k",
                                lambda ids: "", token_bytes=PIECES.__getitem__, append=True)
    fan = FanOut(services, publisher, [pipeline])

    async def scenario() -> None:
        runner = asyncio.create_task(fan.run())
        for n, (text, final) in enumerate((
                ("the dog", False), ("the dog runs", False), ("the dog runs fast", False),
                ("the dog runs fast.", True))):
            fan.submit(Update(0, text, final))
            while len(publisher.captions) <= n:  # one update at a time: no coalescing
                await asyncio.sleep(0)
        fan.stop()
        await asyncio.wait_for(runner, 10)

    asyncio.run(scenario())
    commits = [c for kind, c in publisher.frames if kind == "commit"]
    assert [(c.text, c.delta, c.final) for c in commits] == [
        ("Der", "Der", False), ("Der Hund", " Hund", False),
        ("Der Hund läuft schnell.", " läuft schnell.", True)]
    assert translator.forced == [[], [], [1], [1, 2]]
    final = publisher.captions[-1]
    assert final["final"] and final["text"] == "Der Hund läuft schnell."
    assert publisher.frames[-1][0] == "caption" and publisher.frames[-2][0] == "commit"
    assert pipeline.commits == {}


def test_a_final_lets_its_pause_translation_finish_and_stops_other_partials() -> None:
    """A partial heard at a pause is translated as a final (a final's rank, the hint); a
    final with its words lets it finish (the translator gives the final that translation),
    a final with other words stops it as any running partial."""
    from app.translation.backend import PRIORITY_FINAL

    paused = Update(2, "so we met", False, pause=True)
    publisher, jobs = _one_running_then(paused, Update(2, "so we met", True))
    assert (jobs[0]["is_final"], jobs[0]["job"].priority, jobs[0]["hints"].likely_final) == (
        False, PRIORITY_FINAL, True)
    assert [(c["source"], c["final"]) for c in publisher.captions] == [
        ("so we met", False), ("so we met", True)]
    publisher, _ = _one_running_then(paused, Update(2, "so we met again", True))
    assert [(c["source"], c["final"]) for c in publisher.captions] == [
        ("so we met again", True)]


def test_a_pause_partial_stops_a_running_ordinary_partial() -> None:
    publisher, _ = _one_running_then(
        Update(4, "we", False), Update(4, "we met", False, pause=True),
        held=lambda kw: not kw["hints"].likely_final and not kw["is_final"])
    assert [c["source"] for c in publisher.captions] == ["we met"]
