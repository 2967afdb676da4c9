"""The 'start' handshake (``app/live/start.py``): what a refused start gives back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.server import create_app
from app.settings import Settings
from app.speech.engines import ENGINES, RecognizerEngine, register
from app.speech.recognizer import SAMPLE_RATE
from app.speech.service import SpeechRecognition
from tests.examples.test_plug_in_backend import (
    LOOPBACK,
    SCRIPT,
    SOCKETS,
    BeepRecognizer,
    load_word_backend,
)


@pytest.fixture()
def kept_streams() -> Iterator[list[BeepRecognizer]]:
    """A recogniser engine that keeps a reference to every stream it opens (as a cache or
    a reference cycle would): a stream's place then comes back only when it is closed."""
    opened: list[BeepRecognizer] = []

    def open_stream(model: object, language: str, options: object) -> BeepRecognizer:
        opened.append(BeepRecognizer(SCRIPT))
        return opened[-1]

    register(RecognizerEngine(name="kept", missing=lambda: None, load=lambda options: None,
                              open=open_stream))
    yield opened
    ENGINES.pop("kept")


def test_an_audio_start_refused_for_its_room_gives_its_recogniser_place_back(
        kept_streams: list[BeepRecognizer]) -> None:
    app = create_app(Settings(), load_in_background=False, load_backend=load_word_backend)
    state = app.state.livetrans
    state.speech = SpeechRecognition(engine="kept", max_speakers=1)
    with TestClient(app, base_url=LOOPBACK) as client:
        with client.websocket_connect(f"{SOCKETS}/v1/live") as holder:
            holder.send_json({"type": "start", "target_lang": "de", "room": "hall"})
            assert holder.receive_json()["type"] == "ready"
            with client.websocket_connect(f"{SOCKETS}/v1/live") as late:
                late.send_json({"type": "start", "target_lang": "de", "input": "audio",
                                "sample_rate": SAMPLE_RATE, "room": "hall"})
                assert late.receive_json()["code"] == "room_taken"
                assert len(kept_streams) == 1 and state.speech.speakers == 0
                # the place is free: the same socket starts audio in another room
                late.send_json({"type": "start", "target_lang": "de", "input": "audio",
                                "sample_rate": SAMPLE_RATE, "room": "side"})
                assert late.receive_json()["type"] == "ready"
                assert state.speech.speakers == 1
