"""Unit tests of the live socket's edge helpers (no model)."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest

from app.live.frames import FrameError, encode_frame, log_unexpected, parse_frame, safe_echo
from app.live.limits import (
    SOCKET_EMPTY_S,
    LiveLimits,
    ReadPauses,
    admission_refusal,
    limits_of,
)
from app.live.messages import (
    Refusal,
    parse_start_targets,
    parse_text,
    segment_of,
    sniff_segment,
)


def test_safe_echo_escapes_surrogates_and_controls_and_cuts() -> None:
    assert safe_echo("a\ud800b\n\x1b") == "a\\ud800b\\n\\x1b"
    assert safe_echo("x" * 100, limit=5) == "xxxxx..."
    assert safe_echo(12) == "12"
    safe_echo("\udfff" * 10).encode("utf-8")  # always encodable


def test_encode_frame_never_fails() -> None:
    text = encode_frame({"type": "error", "message": "bad \ud800", "nested": ["\udc00"]})
    text.encode("utf-8")
    assert json.loads(text)["message"] == "bad \\ud800"
    assert json.loads(encode_frame({"type": "caption", "text": "Grüße 😀"}))["text"] == \
        "Grüße 😀"


@pytest.mark.parametrize(("raw", "code"), [
    ("{", "invalid_json"), ("[" * 100_000, "invalid_json"),
    ('{"type": "final", "segment": ' + "9" * 5000 + "}", "invalid_json"),
    ("[]", "invalid_message"), ('{"type": 5}', "invalid_message"), ("", "invalid_json"),
])
def test_parse_frame_turns_every_failure_into_a_frame_error(raw, code) -> None:
    with pytest.raises(FrameError) as exc:
        parse_frame(raw)
    assert exc.value.code == code


def test_start_validation_refuses_unknown_names_and_bad_numbers() -> None:
    start, targets, source = parse_start_targets({"type": "start", "target_lang": "DE",
                                                  "beta": 0})
    target = targets[0]
    assert (target, source, start.beta) == ("de", "en", 0.0)
    for bad, code in [({"drafters": ["warp"]}, "unknown_drafter"),
                      ({"drafters": ["ngram", "ngram"]}, "invalid_message"),
                      ({"bias_scope": "x"}, "unknown_mode"),
                      ({"target_lang": "xx\ud800"}, "invalid_message"),  # not text
                      ({"target_lang": "xx"}, "unsupported_language"),
                      ({"beta": float("nan")}, "invalid_message"),
                      ({"mask_k": "3"}, "invalid_message")]:
        with pytest.raises(Refusal) as exc:
            parse_start_targets({"type": "start", "target_lang": "de", **bad})
        assert exc.value.code == code
        encode_frame({"message": exc.value.message}).encode("utf-8")


def test_text_messages_and_their_segment() -> None:
    assert parse_text({"type": "final", "segment": 3, "text": "Hi"}, 10).segment == 3
    with pytest.raises(Refusal, match="surrogate"):
        parse_text({"type": "final", "segment": 3, "text": "Hi \ud800"}, 10)
    with pytest.raises(Refusal) as exc:
        parse_text({"type": "final", "segment": 3, "text": "x" * 11}, 10)
    assert exc.value.code == "too_large"
    assert [segment_of({"segment": s}) for s in (0, 2**53 - 1, 2**53, -1, True, 1.0, "1")] == \
        [0, 2**53 - 1, None, None, None, None, None]


def test_sniff_segment_of_an_oversized_frame() -> None:
    raw = json.dumps({"type": "final", "segment": 12, "text": "y" * 10})
    assert sniff_segment(raw) == (12, True)
    assert sniff_segment('{"type": "partial", "segment": 1.5}') == (None, False)
    assert sniff_segment('{"segment": 9007199254740992}') == (None, False)


def test_admission_counts_all_connections_and_per_key() -> None:
    limits = LiveLimits(max_connections=3, max_connections_per_key=2)
    assert admission_refusal([None, None], None, limits) is None
    assert "limit 3" in admission_refusal(["a", "b", None], "c", limits)
    assert "API key" in admission_refusal(["a", "a"], "a", limits)
    assert admission_refusal(["a", "a"], "b", limits) is None


def test_limits_come_from_settings_where_defined() -> None:
    live = SimpleNamespace(max_connections=5)
    state = SimpleNamespace(settings=SimpleNamespace(live=live), live_limits=None)
    assert limits_of(state).max_connections == 5
    assert limits_of(state).max_pending_finals == LiveLimits().max_pending_finals
    state.live_limits = LiveLimits(max_pending_finals=1)
    assert limits_of(state).max_pending_finals == 1


def test_read_pauses_stay_under_the_keepalive_and_renew_on_an_empty_socket() -> None:
    """Pauses for room count together until a receive finds the socket empty (the pong
    behind the client's frames is read only then); the budget never exceeds the cap kept
    under the WebSocket keepalive, whatever ``backpressure_s`` says."""
    assert LiveLimits(backpressure_s=30.0).read_pause_s == LiveLimits().max_read_pause_s < 20
    assert LiveLimits(backpressure_s=0.3).read_pause_s == 0.3
    pauses = ReadPauses(1.0)
    pauses.paused(0.6)
    pauses.received(0.0)  # the next frame was already there: the socket is not empty
    pauses.paused(0.6)
    assert pauses.left() == 0.0
    pauses.received(SOCKET_EMPTY_S)  # the reader waited for it: everything was read
    assert pauses.left() == 1.0


def test_unexpected_errors_are_logged_escaped_with_traceback(caplog) -> None:
    log = logging.getLogger("livetrans.live.test")
    try:
        raise ValueError("client text \ud800\nFAKE LINE")
    except ValueError as exc:
        with caplog.at_level(logging.ERROR, logger=log.name):
            log_unexpected(log, exc, "somewhere", 4)
    line = caplog.records[0].getMessage()
    assert "\\ud800\\nFAKE LINE" in line and "\nFAKE" not in line and "Traceback" in line
