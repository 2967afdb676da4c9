"""session.update's rules: languages checked, the model fixed, null turns options off."""

from __future__ import annotations

import pytest

from app.live.realtime.client_events import ClientEventError, parse_session_fields
from app.live.realtime.session_state import SessionConfig, language_checker

CHECK = language_checker(lambda langs: None)


def _update(config: SessionConfig, raw: dict) -> SessionConfig:
    return config.updated(parse_session_fields(raw), raw, CHECK)


def test_created_session_has_the_sdk_shape() -> None:
    s = SessionConfig(model="livetrans").to_json()
    assert s["type"] == "translation" and s["id"].startswith("sess_")
    assert s["model"] == "livetrans" and isinstance(s["expires_at"], int)
    assert s["audio"] == {"input": {"transcription": None, "noise_reduction": None},
                          "output": {"language": None}}


def test_update_sets_and_clears_options() -> None:
    c = _update(SessionConfig(model="m"), {"audio": {
        "output": {"language": "DE"}, "input": {"transcription": {"model": "whisper"},
                                                "noise_reduction": {"type": "far_field"}}},
        "livetrans": {"source_language": "en"}})
    assert (c.output_language, c.transcription_model, c.source_language) == ("de", "whisper",
                                                                             "en")
    c2 = _update(c, {"audio": {"input": {"transcription": None}}})
    assert c2.transcription_model is None and c2.output_language == "de"
    assert c2.noise_reduction == {"type": "far_field", "strength": None}
    assert c2.id == c.id


def test_an_unknown_language_or_another_model_leaves_the_session_as_it_was() -> None:
    c = SessionConfig(model="m", output_language="de")
    with pytest.raises(ClientEventError) as err:
        _update(c, {"audio": {"output": {"language": "xx-klingon"}}})
    assert err.value.code == "unsupported_language"
    assert err.value.param == "session.audio.output.language"
    with pytest.raises(ClientEventError) as err:
        _update(c, {"model": "gpt-realtime-translate"})
    assert err.value.code == "cannot_update_model"
    assert _update(c, {"model": "m", "type": "translation"}) == c


def test_a_language_the_server_does_not_serve_is_refused() -> None:
    check = language_checker(lambda langs: next(
        ((p, "not served") for p, lang in langs.items() if lang == "ja"), None))
    c = SessionConfig(model="m")
    raw = {"audio": {"output": {"language": "ja"}}}
    with pytest.raises(ClientEventError) as err:
        c.updated(parse_session_fields(raw), raw, check)
    assert err.value.code == "language_not_served"
