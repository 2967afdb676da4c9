"""What YouTube's ingestion and a webhook receiver get (``youtube``, ``webhook``)."""

from __future__ import annotations

import hashlib
import hmac
import json
from urllib.parse import parse_qs, urlsplit

from app.live.outputs import webhook, youtube


def test_youtube_timestamp_is_utc_with_milliseconds() -> None:
    assert youtube.timestamp(0) == "1970-01-01T00:00:00.000"
    assert youtube.timestamp(1356307206.873) == "2012-12-24T00:00:06.873"


def test_youtube_body_is_a_time_line_then_one_text_line() -> None:
    body = youtube.body(1356307206.873, " Zwei\nZeilen\r\nund\x00mehr ")
    assert body == b"2012-12-24T00:00:06.873\nZwei<br>Zeilen<br>und mehr\n"
    assert youtube.body(0, "Grüße 😀").decode("utf-8").endswith("Grüße 😀\n")


def test_youtube_seq_is_added_or_replaced_and_the_rest_kept() -> None:
    url = youtube.url_with_seq("http://upload.youtube.com/closedcaption?cid=abc&seq=9", 3)
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == \
        ("http", "upload.youtube.com", "/closedcaption")
    assert parse_qs(parts.query) == {"cid": ["abc"], "seq": ["3"]}
    assert parse_qs(urlsplit(youtube.url_with_seq("https://h/x", 1)).query) == {"seq": ["1"]}


def test_webhook_body_and_signature() -> None:
    data = webhook.body("r", "t", "de", 4, 1.5, 2.0, "Hello", "Hallo \"Welt\"")
    assert json.loads(data) == {"room": "r", "talk": "t", "lang": "de", "segment": 4,
                                "start": 1.5, "end": 2.0, "source": "Hello",
                                "text": "Hallo \"Welt\""}
    sig = webhook.signature("key", data)
    assert sig == "sha256=" + hmac.new(b"key", data, hashlib.sha256).hexdigest()
    assert webhook.verify("key", data, sig)
    assert not webhook.verify("key", data + b" ", sig)
    assert not webhook.verify("key", data, None)
    webhook.body("r", "t", "de", 0, 0, 0, "\ud800", "x")  # never raises
