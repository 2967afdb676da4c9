"""Signed JSON webhooks: one POST per final caption.

The body is compact JSON (UTF-8) with ``room``, ``talk``, ``lang``, ``segment``, ``start``,
``end`` (seconds from the talk's start, as the transcript has them), ``source`` and
``text``; the header ``X-Livetrans-Signature: sha256=<hex>`` is the HMAC-SHA256 of those
exact bytes under the output's secret, so a receiver checks the bytes it got before it
parses them (``verify``). A retry sends the same bytes; ``talk``, ``lang`` and ``segment``
together name a final once, for a receiver that must not count one twice.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

CONTENT_TYPE = "application/json"
SIGNATURE_HEADER = "X-Livetrans-Signature"


def body(room: str, talk: str, lang: str, segment: int, start: float, end: float,
         source: str, text: str) -> bytes:
    payload: dict[str, Any] = {"room": room, "talk": talk, "lang": lang, "segment": segment,
                               "start": start, "end": end, "source": source, "text": text}
    # a lone surrogate (never in validated input; guarded all the same) cannot be UTF-8
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", "replace")


def signature(secret: str, data: bytes) -> str:
    """The header's value: ``sha256=`` and the hex HMAC-SHA256 of ``data``."""
    digest = hmac.new(secret.encode("utf-8"), data, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def verify(secret: str, data: bytes, header: str | None) -> bool:
    """What a receiver does: the header matches the body's HMAC (in constant time)."""
    return header is not None and hmac.compare_digest(signature(secret, data), header)
