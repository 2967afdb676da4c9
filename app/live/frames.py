"""Frames of the live socket that never fail: parsing, encoding, echoing and logging.

A WebSocket text frame must be valid UTF-8, but JSON lets a client smuggle in what UTF-8
cannot carry: ``"\\ud800"`` parses to a lone UTF-16 surrogate. Echoed back in an error
message, such a string made ``send_text`` raise ``UnicodeEncodeError`` and the connection
died without a close frame. Everything the server sends goes through ``encode_frame``,
every client string it repeats through ``safe_echo``, and every log line about a client's
input through ``log_unexpected``, so no input can break the socket or forge a log line.
"""

from __future__ import annotations

import json
import logging
import re
import traceback
from typing import Any

ECHO_CHARS = 80  # a client string repeated in an error message is cut to this length

_UNSAFE = re.compile(r"[\ud800-\udfff\x00-\x1f\x7f-\x9f\u2028\u2029]")


class FrameError(ValueError):
    """A frame that is not a JSON object with a string ``type``; ``code`` names why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def safe_echo(value: object, limit: int = ECHO_CHARS) -> str:
    """A client value fit to repeat in a message or a log line: lone surrogates and control
    characters become visible escapes (``\\ud800``, ``\\n``), and it is cut to ``limit``."""
    text = value if isinstance(value, str) else repr(value)
    cut = text[:limit]
    escaped = _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), cut)
    return escaped + ("..." if len(text) > limit else "")


def unencodable(text: str) -> bool:
    """True if ``text`` holds a lone surrogate, which UTF-8 (and so a text frame) cannot."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub(v) for v in value]
    return value


def encode_frame(payload: dict[str, Any]) -> str:
    """JSON text of a server message, guaranteed encodable as UTF-8.

    Strings the server built from client input are already safe; this is the last line of
    defence for anything that slipped through (a surrogate in a model output, a future field).
    """
    text = json.dumps(payload, ensure_ascii=False, allow_nan=False, default=str)
    if unencodable(text):
        text = json.dumps(_scrub(payload), ensure_ascii=False, allow_nan=False, default=str)
    return text


def parse_frame(raw: str) -> dict[str, Any]:
    """The frame as a JSON object with a string ``type``, or ``FrameError``.

    ``json.loads`` raises more than ``JSONDecodeError`` on hostile input: ``ValueError`` for
    an integer of more than 4300 digits and ``RecursionError`` for deep nesting; both are a
    client's mistake, not the server's.
    """
    try:
        msg = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise FrameError("invalid_json", f"not valid JSON: {exc.msg} at {exc.pos}") from None
    except (ValueError, RecursionError) as exc:
        raise FrameError("invalid_json", f"not valid JSON: {safe_echo(str(exc))}") from None
    if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
        raise FrameError("invalid_message", "a message is a JSON object with a 'type'")
    return msg


def log_unexpected(log: logging.Logger, exc: BaseException, where: str,
                   segment: int | None = None) -> None:
    """Log a bug with its traceback, without letting client text into the log raw.

    The traceback's frames are the server's code; only the exception's message can carry
    client input, so it is escaped and cut like an echo.
    """
    frames = "".join(traceback.format_tb(exc.__traceback__))
    message = safe_echo(str(exc), limit=200)
    log.error("live: unexpected %s in %s (segment %s): %s\nTraceback:\n%s",
              type(exc).__name__, where, segment, message, frames.rstrip())
