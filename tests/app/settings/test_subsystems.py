"""Settings by subsystem (issue 47, item 4): nested models read by their short names, the
flat names kept for building and reading, ``--asr-engine`` from the recogniser registry,
and ``serve --help`` grouped by subsystem."""

from __future__ import annotations

import argparse

import pytest

from app import cli
from app.settings import (
    FLAT,
    LiveSettings,
    ModelSettings,
    ServerSettings,
    Settings,
    SettingsError,
    SpeechSettings,
    load_settings,
)


@pytest.fixture(autouse=True)
def _no_livetrans_env(monkeypatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("LIVETRANS_"):
            monkeypatch.delenv(name)


def test_each_flat_name_lives_in_one_subsystem_and_reads_the_same_there() -> None:
    s = load_settings(live_max_listeners=7, room_bus="redis://h:6379/0", max_audio_speakers=2,
                      max_live_sessions=3, n_ctx=512, port=9100)
    assert (s.live.max_listeners, s.rooms.bus, s.speech.max_speakers, s.live.max_sessions,
            s.n_ctx, s.http.port) == (7, "redis://h:6379/0", 2, 3, 512, 9100)
    for name, where in FLAT.items():
        holder = getattr(s, where.subsystem) if where.subsystem else s
        assert getattr(s, name) == getattr(holder, where.name), name  # flat read: compat


def test_every_subsystem_module_is_a_settings_model_of_its_own(monkeypatch) -> None:
    monkeypatch.setenv("LIVETRANS_LIVE_MAX_LISTENERS", "9")
    monkeypatch.setenv("LIVETRANS_MAX_AUDIO_SPEAKERS", "4")
    assert LiveSettings().max_listeners == 9
    assert SpeechSettings().max_speakers == 4
    # the model's stay at the top: Settings is a ModelSettings, as the loader takes
    assert issubclass(Settings, ModelSettings) and issubclass(Settings, ServerSettings)


def test_nested_values_mix_with_flat_ones_and_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("LIVETRANS_LIVE_MAX_VIEWERS", "33")
    s = Settings(live={"max_listeners": 5}, live_max_connections=6)
    assert (s.live.max_listeners, s.live.max_connections, s.live.max_viewers) == (5, 6, 33)
    assert Settings(live=LiveSettings(max_listeners=4), live_max_viewers=8).live.max_listeners \
        == 4


def test_a_flat_name_is_read_only_and_an_unknown_name_still_fails() -> None:
    s = Settings()
    with pytest.raises(AttributeError):
        s.no_such_setting  # noqa: B018
    with pytest.raises(ValueError):
        s.room_bus = "redis://h:6379/0"
    s.rooms.bus = "redis://h:6379/0"
    assert s.room_bus == "redis://h:6379/0"


def test_a_nested_error_names_the_flat_flag_and_variable() -> None:
    with pytest.raises(SettingsError, match=r"^invalid --live-max-listeners "
                                            r"\(LIVETRANS_LIVE_MAX_LISTENERS\) \(got 'x'\)"):
        load_settings(live_max_listeners="x")


def test_asr_engine_names_a_registered_recogniser(monkeypatch) -> None:
    assert load_settings().speech.engine == "whisper"
    monkeypatch.setenv("LIVETRANS_ASR_ENGINE", " Whisper ")
    assert load_settings().speech.engine == "whisper"
    with pytest.raises(SettingsError) as info:
        load_settings(asr_engine="vosk")
    message = str(info.value)
    assert message == ("invalid --asr-engine (LIVETRANS_ASR_ENGINE) (got 'vosk'): "
                       "Input should be 'whisper'")
    args = _serve_parser().parse_args(["--asr-engine", "whisper"])
    assert cli.serve_settings(args).speech.engine == "whisper"


def test_asr_engine_chooses_the_speech_services_recogniser(monkeypatch) -> None:
    from app.server import create_app
    from app.speech import engines

    assert create_app(load_settings()).state.livetrans.speech.engine.name == "whisper"
    fake = engines.RecognizerEngine(name="fake", missing=lambda: None, load=lambda o: None,
                                    open=lambda model, language, o: None)
    monkeypatch.setitem(engines.ENGINES, "fake", fake)
    app = create_app(load_settings(asr_engine="fake"))  # no lifespan: no model loads
    assert app.state.livetrans.speech.engine is fake


def _serve_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="livetrans serve")
    cli._add_settings_flags(parser)
    return parser


def test_serve_help_groups_flags_by_subsystem() -> None:
    parser = _serve_parser()
    titles = {group.title: {a.dest for a in group._group_actions}
              for group in parser._action_groups}
    assert titles["model options"] >= {"model", "n_ctx"}
    assert titles["live options"] >= {"live_max_listeners", "max_live_sessions"}
    assert titles["speech options"] >= {"asr_engine", "asr_model", "max_audio_speakers"}
    assert titles["room options"] >= {"room_bus", "data_dir"}
    assert set().union(*titles.values()) >= set(FLAT)


def test_a_bad_variable_names_its_flat_flag_and_variable(monkeypatch) -> None:
    monkeypatch.setenv("LIVETRANS_ROOM_BUS", "http://x")
    with pytest.raises(SettingsError, match=r"^invalid --room-bus \(LIVETRANS_ROOM_BUS\)"):
        load_settings()


def test_final_draft_is_a_scheduling_flag_and_variable(monkeypatch) -> None:
    assert load_settings().scheduling.final_draft == 4
    args = _serve_parser().parse_args(["--final-draft", "0"])
    assert cli.serve_settings(args).scheduling.final_draft == 0  # the whole draft at once
    monkeypatch.setenv("LIVETRANS_FINAL_DRAFT", "6")
    assert load_settings().scheduling.final_draft == 6
    monkeypatch.setenv("LIVETRANS_FINAL_DRAFT", "-1")
    with pytest.raises(SettingsError, match=r"--final-draft \(LIVETRANS_FINAL_DRAFT\)"):
        load_settings()


def test_voice_engine_names_a_built_in_choice_or_a_registered_voice(monkeypatch) -> None:
    from app.voice import engines

    assert load_settings().voice.engine == "auto"
    with pytest.raises(SettingsError) as info:
        load_settings(voice_engine="festival")
    assert str(info.value).startswith(
        "invalid --voice-engine (LIVETRANS_VOICE_ENGINE) (got 'festival'): Input should be "
        "'auto', ")
    assert "'espeak-ng'" in str(info.value) and str(info.value).endswith(" or 'none'")
    beeps = engines.VoiceEngine(name="beeps", speaks=lambda lang: True,
                                open=lambda lang, options: None)
    monkeypatch.setitem(engines.ENGINES, "beeps", beeps)
    monkeypatch.setenv("LIVETRANS_VOICE_ENGINE", "Beeps")
    assert load_settings().voice.engine == "beeps"
