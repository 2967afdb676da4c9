"""The client's events at the edge: three types, strict fields, bounded size."""

from __future__ import annotations

import json

import pytest

from app.live.realtime.client_events import (
    MAX_EVENT_CHARS,
    Append,
    ClientEventError,
    Close,
    Update,
    parse_client_event,
)


def _refusal(raw: str) -> ClientEventError:
    with pytest.raises(ClientEventError) as err:
        parse_client_event(raw)
    return err.value


def test_the_three_events_parse_with_their_ids() -> None:
    update = parse_client_event(json.dumps({"type": "session.update", "event_id": "e1",
                                            "session": {"audio": {"output": {
                                                "language": "de"}}}}))
    assert isinstance(update, Update) and update.event_id == "e1"
    assert update.session.audio.output.language == "de"
    append = parse_client_event(json.dumps({"type": "session.input_audio_buffer.append",
                                            "audio": "AAAA"}))
    assert isinstance(append, Append) and append.audio == "AAAA"
    assert isinstance(parse_client_event('{"type": "session.close"}'), Close)


@pytest.mark.parametrize(("raw", "code"), [
    ("not json", "invalid_json"),
    ("[1, 2]", "invalid_event"),
    ('{"type": 3}', "invalid_event"),
    ('{"type": "response.create"}', "unknown_event"),
    ('{"type": "session.close", "extra": 1}', "unknown_parameter"),
    ('{"type": "session.close", "audio": "AAAA"}', "unknown_parameter"),
    ('{"type": "session.input_audio_buffer.append", "audio": 5}', "invalid_value"),
    ('{"type": "session.input_audio_buffer.append"}', "invalid_value"),
    ('{"type": "session.update", "session": "de"}', "invalid_value"),
    ('{"type": "session.update", "session": {"voice": "alloy"}}', "unknown_parameter"),
    ('{"type": "session.update", "session": {"audio": {"output": {"language": 7}}}}',
     "invalid_value"),
])
def test_bad_events_are_refused_with_a_code(raw: str, code: str) -> None:
    assert _refusal(raw).code == code


def test_another_input_format_or_rate_is_a_validation_error() -> None:
    for fmt in ({"type": "audio/pcm", "rate": 16000}, {"type": "audio/pcmu"}):
        err = _refusal(json.dumps({"type": "session.update", "event_id": "x", "session": {
            "audio": {"input": {"format": fmt}}}}))
        assert err.code == "unsupported_audio_format"
        assert err.param.startswith("session.audio.input.format")
        assert err.event_id == "x"
    ok = parse_client_event(json.dumps({"type": "session.update", "session": {
        "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000}}}}}))
    assert isinstance(ok, Update)


def test_an_oversized_event_is_refused_before_it_is_parsed() -> None:
    raw = '{"type": "session.input_audio_buffer.append", "audio": "' + \
        "A" * MAX_EVENT_CHARS + '"}'
    assert _refusal(raw).code == "event_too_large"


def test_a_hostile_event_id_is_bounded_and_echoed_safely() -> None:
    err = _refusal(json.dumps({"type": "nope", "event_id": "\ud800" + "x" * 500}))
    assert err.code == "unknown_event" and len(err.event_id) <= 64
