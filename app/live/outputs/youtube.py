"""YouTube Live's closed-caption ingestion: one final caption per POST.

YouTube's format ("Closed Captions over HTTP for YouTube Live Streams", help answer
6077032): an HTTP POST to the ingestion URL YouTube shows the streamer, with a ``seq``
query parameter that grows by one between posts of new caption data and stays the same on
a retry; the body is ``text/plain`` lines, a UTC time ``YYYY-MM-DDTHH:MM:SS.mmm`` then the
caption's text (UTF-8; a line break inside a caption is ``<br>``). YouTube shows a caption
by that time against its own clock, so the time is when the final was captioned, and a
post that could not land within a minute or so is of no use (``delivery`` retries for a
bounded time).

The optional ``region:reg1#cue1`` after the time is left out: YouTube documents it as
"format TBD" and its own example sends none, so a caption takes YouTube's default place.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlencode, urlsplit

CONTENT_TYPE = "text/plain"  # no charset: YouTube's format is UTF-8 by definition
_BREAKS = re.compile(r"\r\n|[\r\n\u2028\u2029\x85\x0b\x0c]")


def timestamp(at: float) -> str:
    """Unix seconds -> ``2026-11-25T13:05:09.123`` (UTC, milliseconds)."""
    moment = datetime.fromtimestamp(at, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}"


def caption_text(text: str) -> str:
    """One caption on one line: line breaks become ``<br>``, other control characters
    spaces (a newline would start a line YouTube reads as a time)."""
    one_line = _BREAKS.sub("<br>", text.strip())
    return "".join(" " if ord(c) < 0x20 or c == "\x7f" else c for c in one_line)


def body(at: float, text: str) -> bytes:
    """The POST body of one caption: its time line, its text line, a final newline."""
    return f"{timestamp(at)}\n{caption_text(text)}\n".encode("utf-8", "replace")


def url_with_seq(url: str, seq: int) -> str:
    """The ingestion URL with ``seq=N`` (replacing one the URL already has), its other
    parameters (``cid``, or ``id``, ``ns``, ``signature`` ...) kept as they are."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "seq"]
    query.append(("seq", str(seq)))
    return parts._replace(query=urlencode(query)).geturl()
