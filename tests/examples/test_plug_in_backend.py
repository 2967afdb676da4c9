"""How to plug a new translation backend and a new speech recogniser into livetrans: a
worked example, end to end through the real FastAPI app, without a model.

Read it top to bottom; each part names the seam it fills.

1. **A translation backend** is two objects (``app/translation/backend.py``):

   * a ``TranslationBackend``: tokens in and out, and ``await generate(request) ->
     result``, one generation. Here ``WordBackend``: one token per word, and a
     "translation" made word by word from a small dictionary, streamed word by word.
     (Not an upper-cased echo of the source: the translator's verdict would rightly call
     that a ``copy`` of the source and retry it, ``app/translation/pathology.py``.)
   * a ``BackendService``: how the server runs a translation job where the model lives
     and what it reads without one (health, overload, queue positions, detokenizing,
     shutdown). Here ``InlineService``: each job runs at once, on the event loop.

   ``create_app(load_backend=...)`` (``app/server.py``) hands them to the server where
   the llama.cpp model would be loaded: the loader sets ``state.backend`` and
   ``state.translator`` (``app/api/state.py``). Everything above (the live path, the chat
   route, failures, metrics) sees only the seam.

2. **A speech recogniser** is a ``Recognizer`` (``app/speech/recognizer.py``: 16 kHz audio
   in, ``partial``/``final`` events out) registered by name with a ``RecognizerEngine``
   (``app/speech/engines.py``); the speech service opens streams of the engine it is
   configured with (``--asr-engine``). Here ``BeepRecognizer``: each beep is the next
   word of its script, a pause ends the sentence. (It is a plain ``Recognizer``, fed whole
   by the service's one thread; a ``ScheduledRecognizer`` would also let the thread
   schedule its decodes.)

3. **A voice** is a ``Synthesizer`` (``app/voice/base.py``: text in, PCM16 out) registered
   by name with a ``VoiceEngine`` (``app/voice/engines.py``); the voice registry builds one
   per language from the engines it is configured with. Here ``BeepVoice``: one beep a word.

4. **The routes, unchanged**: ``/v1/live`` with text updates and a viewer of the room,
   ``/v1/live`` with audio through the recogniser, ``/v1/live`` with a voice speaking the
   committed text, and ``/v1/chat/completions`` streamed.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.api.state import ServerState
from app.server import create_app
from app.settings import Settings
from app.settings.speech import SpeechSettings
from app.settings.voice import VoiceSettings
from app.speech.engines import ENGINES, RecognizerEngine, register
from app.speech.recognizer import SAMPLE_RATE, Recognizer, SpeechEvent
from app.translation.backend import (
    PRIORITY_REQUEST,
    BackendHealth,
    BackendService,
    GenerationRequest,
    GenerationResult,
    JobCancelledError,
    TranslationBackend,
    WorkerStoppedError,
)
from app.translation.prompts import FewShotFormat
from app.translation.translator import Translator
from app.voice.base import VoiceInfo
from app.voice.engines import ENGINES as VOICE_ENGINES
from app.voice.engines import VoiceEngine
from app.voice.engines import register as register_voice

T = TypeVar("T")
LOOPBACK = "http://127.0.0.1"  # a host the server answers to (--allowed-hosts)
SOCKETS = "ws://127.0.0.1"

# -- 1. the translation backend ----------------------------------------------------------

BOS = 0
DICTIONARY = {"good": "guten", "morning": "morgen", "everyone": "zusammen",
              "thank": "danke", "you": "euch", "all": "allen"}


class WordBackend:
    """A ``TranslationBackend`` with one token per word (its leading space included) and
    a word-by-word dictionary for a model. Its vocabulary grows as text is tokenized."""

    def __init__(self) -> None:
        self.pieces = ["<s>"]  # token id -> text
        self.ids: dict[str, int] = {}
        self.lock = threading.Lock()  # tokenize may be called from any thread

    def tokenize(self, text: str, add_bos: bool = False, special: bool = False) -> list[int]:
        ids = [BOS] if add_bos else []
        with self.lock:
            for piece in re.findall(r"\s*\S+|\s+$", text):
                if piece not in self.ids:
                    self.ids[piece] = len(self.pieces)
                    self.pieces.append(piece)
                ids.append(self.ids[piece])
        return ids

    def detokenize(self, tokens: list[int]) -> str:
        return "".join(self.pieces[t] for t in tokens if t != BOS)

    def token_bytes(self, token: int) -> bytes:
        return b"" if token == BOS else self.pieces[token].encode()

    async def generate(self, req: GenerationRequest) -> GenerationResult:
        """Continue the prompt with the translation of the line it asks for, one token at
        a time: stream each (``on_text``), stop when cancelled or at ``max_tokens``, and
        report how much of the SSBD draft (the previous translation) the answer kept."""
        source, begun = self.asked(req)
        words = [DICTIONARY.get(w.lower(), w) for w in source.split()]
        translation = " " + " ".join(words)
        answer = self.tokenize(translation.removeprefix(begun))
        tokens: list[int] = []
        finish = "length" if len(answer) > req.max_tokens else "stop"
        for token in answer[: req.max_tokens]:
            if req.cancel is not None and req.cancel.is_set():
                finish = "cancelled"
                break
            tokens.append(token)
            if req.on_text is not None:
                req.on_text(self.pieces[token])
            await asyncio.sleep(0)  # a real backend awaits its model here
        result = GenerationResult(tokens=tokens, text=self.detokenize(tokens),
                                  finish_reason=finish, prompt_tokens=len(req.prompt_tokens),
                                  prompt_tokens_cached=0, forward_passes=len(tokens))
        kept = 0
        while kept < min(len(req.draft), len(tokens)) and req.draft[kept] == tokens[kept]:
            kept += 1
        result.drafts.add("ssbd", len(req.draft), kept)
        return result

    def asked(self, req: GenerationRequest) -> tuple[str, str]:
        """The text the prompt asks to translate, and the answer's start the prompt already
        holds. The server's prompt here is the few-shot format
        (``app/translation/prompts/few_shot.py``), which ends with the source's line and the
        target's label (``English: Good morning\nGerman:``); append-only text adds the
        answer's committed words after the label (``German: guten``) and a model continues
        them. This backend reads those two lines."""
        *_, source_line, answer_line = self.detokenize(req.prompt_tokens).split("\n")
        return source_line.split(":", 1)[1].strip(), answer_line.split(":", 1)[1]


class InlineService:
    """A ``BackendService``: runs each translation job at once, on the event loop (a
    remote backend would send it to its server; llama.cpp's files it with its scheduler,
    ``app/translation/llama_backend.py``). Errors are the seam's (``JobCancelledError``,
    ``WorkerStoppedError``, ...): ``app/failures.py`` tells clients what each means."""

    def __init__(self, backend: WordBackend) -> None:
        self.backend = backend
        self.priorities: list[int] = []  # each job's priority, in order (finals first)
        self.stopped = False
        self.seq = 0

    async def run(self, job: Callable[[TranslationBackend], Awaitable[T]], *,
                  priority: int = PRIORITY_REQUEST, cancel: threading.Event | None = None,
                  bypass_limit: bool = False, started: threading.Event | None = None,
                  queue_seq: int | None = None) -> T:
        if self.stopped:
            raise WorkerStoppedError("the backend is shutting down")
        if cancel is not None and cancel.is_set():
            raise JobCancelledError("superseded before it ran")
        self.priorities.append(priority)
        if started is not None:
            started.set()
        return await job(self.backend)

    def health(self) -> BackendHealth:
        return BackendHealth(queue_depth=0, broken=None)

    def overload(self) -> str | None:
        return None

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def detokenize(self, tokens: list[int]) -> str:
        return self.backend.detokenize(tokens)

    def token_bytes(self, token: int) -> bytes:
        return self.backend.token_bytes(token)

    async def shutdown(self, timeout: float) -> None:
        self.stopped = True


def load_word_backend(state: ServerState) -> str:
    """``create_app``'s ``load_backend``: what ``app/server.py``'s ``_load_engine`` does
    for llama.cpp (the runner as the server's backend, a ``Translator`` over it), for the
    dictionary. Returns what the ready line says is served."""
    service: BackendService = InlineService(WordBackend())
    state.backend = service
    state.translator = Translator(service, FewShotFormat(), state.sessions)
    return "a word-by-word dictionary (tests/examples)"


# -- 2. the speech recogniser --------------------------------------------------------------

BLOCK = SAMPLE_RATE // 100  # the recogniser listens in blocks of 10 ms
PAUSE_BLOCKS = 30  # 300 ms of quiet after a word ends the sentence
SCRIPT = ["good", "morning", "everyone", "thank", "you", "all"]


class BeepRecognizer:
    """A ``Recognizer`` that hears each beep as the next word of its script: a partial of
    the sentence so far at each beep, a final after a pause (or at ``flush``)."""

    def __init__(self, script: list[str]) -> None:
        self.script = iter(script)
        self.segment = 0  # the protocol's: the segment in progress
        self.words: list[str] = []
        self.in_beep = False
        self.quiet = 0  # blocks of quiet since the last word
        self.rest = np.zeros(0, np.float32)  # less than a block, for the next feed

    def feed(self, samples: np.ndarray) -> list[SpeechEvent]:
        audio = np.concatenate([self.rest, samples])
        whole = len(audio) // BLOCK * BLOCK
        self.rest = audio[whole:]
        events = []
        for block in audio[:whole].reshape(-1, BLOCK):
            loud = bool(np.abs(block).max() > 0.1)
            if loud and not self.in_beep:
                self.words.append(next(self.script))
                events.append(SpeechEvent("partial", self.segment, " ".join(self.words)))
            self.in_beep = loud
            self.quiet = 0 if loud else self.quiet + 1
            if self.words and self.quiet == PAUSE_BLOCKS:
                events += self.flush()
        return events

    def flush(self) -> list[SpeechEvent]:
        if not self.words:
            return []
        final = SpeechEvent("final", self.segment, " ".join(self.words))
        self.segment, self.words = self.segment + 1, []
        return [final]


def tone(seconds: float, hz: float = 440.0) -> np.ndarray:
    return 0.5 * np.sin(2 * np.pi * hz * np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE)


def quiet(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * SAMPLE_RATE))


def pcm16(samples: np.ndarray) -> bytes:
    """16 kHz samples in [-1, 1] as s16le PCM, what the socket carries."""
    return (samples * 32767).astype("<i2").tobytes()


def beeps_and_pauses(*sentences: int) -> bytes:
    """For each sentence, that many beeps (200 ms, 100 ms apart), then half a second of
    quiet."""
    parts = []
    for beeps in sentences:
        for _ in range(beeps):
            parts += [tone(0.2), quiet(0.1)]
        parts.append(quiet(0.5))
    return pcm16(np.concatenate(parts))


def beeps_in(pcm: bytes) -> int:
    """How many beeps 16 kHz s16le PCM holds (runs of sound, in blocks of 10 ms)."""
    samples = np.frombuffer(pcm, "<i2")[: len(pcm) // 2 // BLOCK * BLOCK]
    loud = np.abs(samples.reshape(-1, BLOCK)).max(axis=1) > 3000
    return int(loud[0]) + int(np.sum(loud[1:] & ~loud[:-1])) if len(loud) else 0


@pytest.fixture()
def beeps_engine() -> Iterator[str]:
    """The recogniser registered by name, as ``app/speech/engines.py`` registers Whisper:
    nothing to install, no model to load, one ``BeepRecognizer`` per speaker."""
    register(RecognizerEngine(
        name="beeps",
        missing=lambda: None,
        load=lambda options: None,
        open=lambda model, language, options: BeepRecognizer(SCRIPT),
    ))
    yield "beeps"
    ENGINES.pop("beeps")


# -- 3. the voice ------------------------------------------------------------------------------


class BeepVoice:
    """A ``Synthesizer`` that says each word as one beep (100 ms of 660 Hz, then 50 ms of
    quiet), at 16 kHz. It ignores ``speed``: a real engine speaks faster when its stream
    fell behind the speaker."""

    def __init__(self, lang: str) -> None:
        self.info = VoiceInfo(lang, engine="beeps", voice="beep", sample_rate=SAMPLE_RATE)

    def synthesize(self, text: str, speed: float = 1.0) -> bytes:
        word = np.concatenate([tone(0.1, 660.0), quiet(0.05)])
        return pcm16(np.tile(word, len(text.split())))


@pytest.fixture()
def beep_voice() -> Iterator[str]:
    """The voice registered by name, as ``app/voice/engines.py`` registers espeak-ng: it
    speaks every language."""
    register_voice(VoiceEngine(
        name="beeps",
        speaks=lambda lang: True,
        open=lambda lang, options: BeepVoice(lang),
    ))
    yield "beeps"
    VOICE_ENGINES.pop("beeps")


# -- 4. the server, with all three plugged in ---------------------------------------------


@pytest.fixture()
def client(beeps_engine: str, beep_voice: str) -> Iterator[TestClient]:
    # the recogniser and the voice by name, as ``serve --asr-engine beeps --voice-engine
    # beeps`` would choose them
    settings = Settings(speech=SpeechSettings(engine=beeps_engine),
                        voice=VoiceSettings(engine=beep_voice))
    app = create_app(settings, load_in_background=False, load_backend=load_word_backend)
    state: ServerState = app.state.livetrans
    assert state.speech.engine.name == beeps_engine
    with TestClient(app, base_url=LOOPBACK) as client:  # runs the start-up: our loader
        yield client


def until(ws: Any, kind: str, audio: bytearray | None = None) -> list[dict]:
    """Frames up to and including the first of type ``kind``; binary frames (a voice's
    audio) go to ``audio``, without their two bytes of header."""
    frames = []
    while True:
        message = ws.receive()
        if message.get("bytes") is not None:
            assert audio is not None and message["bytes"][:2] == b"\x00\x00"  # voice 0
            audio += message["bytes"][2:]
            continue
        frames.append(json.loads(message["text"]))
        if frames[-1]["type"] == kind:
            return frames


def captions(frames: list[dict], final: bool) -> list[tuple[str, str]]:
    return [(f["source"], f["text"]) for f in frames
            if f["type"] == "caption" and f["final"] is final]


def test_the_fakes_fill_the_seams() -> None:
    assert isinstance(WordBackend(), TranslationBackend)
    assert isinstance(BeepRecognizer(SCRIPT), Recognizer)


def test_text_updates_on_the_live_socket_are_translated_for_speaker_and_viewers(
        client: TestClient) -> None:
    assert client.get("/health").json()["status"] == "ok"
    with client.websocket_connect(f"{SOCKETS}/v1/live") as speaker:
        speaker.send_json({"type": "start", "target_lang": "de", "room": "keynote"})
        ready = speaker.receive_json()
        assert ready["type"] == "ready" and ready["room"] == "keynote"
        with client.websocket_connect(f"{SOCKETS}/v1/live/watch?room=keynote&lang=de") as viewer:
            assert viewer.receive_json()["type"] == "joined"
            speaker.send_json({"type": "partial", "segment": 0, "text": "Good morning"})
            speaker.send_json({"type": "final", "segment": 0, "text": "Good morning everyone"})
            speaker.send_json({"type": "final", "segment": 1, "text": "Thank you all"})
            speaker.send_json({"type": "stop"})
            said = until(speaker, "done")
            seen = until(viewer, "ended")

    finals = [("Good morning everyone", "guten morgen zusammen"),
              ("Thank you all", "danke euch allen")]
    assert captions(said, final=True) == finals
    assert captions(seen, final=True) == finals  # the room's viewers get the same captions
    # a partial may be dropped for a newer update of its segment (the fan-out's queue)
    assert set(captions(said, final=False)) <= {("Good morning", "guten morgen")}
    assert [f for f in said if f["type"] == "error"] == []


def test_speech_through_the_recogniser_becomes_partial_and_final_captions(
        client: TestClient) -> None:
    with client.websocket_connect(f"{SOCKETS}/v1/live") as speaker:
        speaker.send_json({"type": "start", "target_lang": "de", "input": "audio",
                           "sample_rate": SAMPLE_RATE})
        assert speaker.receive_json()["input"] == "audio"
        pcm = beeps_and_pauses(3, 3)
        step = SAMPLE_RATE // 5 * 2  # 200 ms frames, as a microphone sends them
        for at in range(0, len(pcm), step):
            speaker.send_bytes(pcm[at:at + step])
        speaker.send_json({"type": "stop"})
        said = until(speaker, "done")

    assert captions(said, final=True) == [("good morning everyone", "guten morgen zusammen"),
                                          ("thank you all", "danke euch allen")]
    # each partial is the sentence so far (the newest may replace an older one unanswered)
    for source, text in captions(said, final=False):
        assert source.startswith(("good", "thank"))
        assert "good morning everyone".startswith(source) or "thank you all".startswith(source)
        assert text == " ".join(DICTIONARY[word] for word in source.split())


def test_committed_text_is_spoken_by_the_voice(client: TestClient) -> None:
    audio = bytearray()
    with client.websocket_connect(f"{SOCKETS}/v1/live") as speaker:
        speaker.send_json({"type": "start", "target_lang": "de", "display": "append",
                           "voices": ["de"]})
        ready = speaker.receive_json()
        assert ready["voices"][0]["engine"] == "beeps"
        assert ready["voices"][0]["sample_rate"] == SAMPLE_RATE
        speaker.send_json({"type": "partial", "segment": 0, "text": "Good morning"})
        speaker.send_json({"type": "final", "segment": 0, "text": "Good morning everyone"})
        speaker.send_json({"type": "final", "segment": 1, "text": "Thank you all"})
        speaker.send_json({"type": "stop"})
        said = until(speaker, "done", audio)

    # append-only text: the commits only ever extend a segment's text ...
    committed = {}
    for commit in (f for f in said if f["type"] == "commit"):
        assert commit["text"].startswith(committed.get(commit["segment"], ""))
        committed[commit["segment"]] = commit["text"]
    assert committed == {0: "guten morgen zusammen", 1: "danke euch allen"}
    # ... and the voice speaks every committed word once, before ``done``
    assert beeps_in(bytes(audio)) == 6


def test_a_streamed_chat_completion_comes_word_by_word(client: TestClient) -> None:
    body = {"model": "default", "target_lang": "de", "stream": True,
            "messages": [{"role": "user", "content": "Good morning everyone"}]}
    with client.stream("POST", "/v1/chat/completions", json=body) as answer:
        assert answer.status_code == 200
        events = [json.loads(line.removeprefix("data: ")) for line in answer.iter_lines()
                  if line.startswith("data: ") and line != "data: [DONE]"]
    deltas = [e["choices"][0]["delta"].get("content") for e in events if e["choices"]]
    pieces = [d for d in deltas if d]
    assert "".join(pieces).strip() == "guten morgen zusammen"
    assert len(pieces) >= 3  # one chunk per generated word: the backend streamed them
