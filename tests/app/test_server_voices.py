"""``app.server``'s voice warm-up: which languages' voices load once the model has, so the
first phrase of a talk is not a model load."""

from __future__ import annotations

from types import SimpleNamespace

from app.server import _warm_voices
from app.settings import Settings


class Voices:
    def __init__(self) -> None:
        self.warmed: list[list[str]] = []

    def warm(self, langs: list[str]) -> None:
        self.warmed.append(langs)


def _state(langs_given: bool, served: frozenset[str] | None, **settings) -> SimpleNamespace:
    return SimpleNamespace(settings=Settings(**settings), langs_given=langs_given,
                           served_langs=served, voices=Voices())


def test_named_voices_and_served_languages_are_warmed_and_nothing_else() -> None:
    state = _state(True, frozenset({"en", "de"}), voices=["en=/tmp/en.onnx"])
    _warm_voices(state)
    assert state.voices.warmed == [["en", "de"]]
    # without --langs the model may serve any language: only the named voices
    state = _state(False, None, voices=["ja=/tmp/ja.onnx"])
    _warm_voices(state)
    assert state.voices.warmed == [["ja"]]
    state = _state(False, None)
    _warm_voices(state)
    assert state.voices.warmed == []
    state = _state(True, frozenset({"en"}), voice_engine="none")
    _warm_voices(state)
    assert state.voices.warmed == []
