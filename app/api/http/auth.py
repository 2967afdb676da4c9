"""API keys, in one place: where a key is read, which paths need one, who owns what.

The HTTP middleware (``app.server``) and the WebSocket routes (``app.api.live``) both ask
``Auth``, so a rule (an open path, the metrics key, how an owner is derived) cannot drift
between the two. Without keys everything is open and nothing has an owner.

* HTTP: the key is ``Authorization: Bearer KEY``.
* WebSocket: the same header, or ``?api_key=KEY`` (a browser cannot set headers on a
  WebSocket; ``app.api.http.redaction`` keeps the query value out of the logs).
* ``/metrics`` shows every tenant's activity: it takes the metrics key when one is set,
  otherwise any API key.
* The owner of a key is a hash of it, never the key itself: sessions and connection limits
  are scoped to it, and it may appear in memory dumps and fair-share labels.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from starlette.requests import HTTPConnection

from app.api.errors import APIError
from app.settings import Settings

# Open without a key even when keys are set. /health answers only its status then, and
# /metrics is not among them: it shows every tenant's activity.
OPEN_PATHS = frozenset({"/health", "/live", "/live/mic-worklet.js", "/pages/transcripts.js",
                        "/watch", "/docs", "/pages/listen.js", "/live/languages",
                        "/openapi.json", "/",
                        "/live/print", "/pages/qr.js"})  # a room's printable QR codes
METRICS_PATH = "/metrics"
# Routes that check their own access, as viewers do: a transcript download takes the talk's
# viewer token or an API key (app.api.transcripts), so the middleware lets it through.
OPEN_PATTERNS = (re.compile(r"/v1/rooms/[^/]+/transcript"),
                 # ... and so do a room's HLS subtitle renditions (app.rooms.hls.route)
                 re.compile(r"/v1/rooms/[^/]+/hls/[^/]+(?:\.m3u8|/[^/]+/[^/]+\.vtt)"),
                 # ... and its voice's HLS audio renditions (app.rooms.voice.route)
                 re.compile(r"/v1/rooms/[^/]+/voice/[^/]+(?:\.m3u8|/[^/]+/[^/]+\.aac)"),
                 # ... and its WebRTC listeners (app.live.listen.route)
                 re.compile(r"/v1/rooms/[^/]+/voice/[^/]+/whep(?:/[^/]+)?"),
                 # ... and so does a room's QR code (app.rooms.audience.route)
                 re.compile(r"/v1/rooms/[^/]+/qr"),
                 # ... and a realtime WebRTC call: an API key or a client secret
                 # (app.api.realtime)
                 re.compile(r"/v1/realtime/translations/calls"))


def is_open_path(path: str) -> bool:
    """Whether ``path`` needs no API key in the middleware (its route may still ask)."""
    return path in OPEN_PATHS or any(p.fullmatch(path) for p in OPEN_PATTERNS)


def bearer_key(auth_header: str) -> str:
    """The key of an ``Authorization: Bearer KEY`` header ('' when there is none)."""
    return auth_header[7:].strip() if auth_header.lower().startswith("bearer ") else ""


def owner_of(key: str) -> str:
    """The owner id of an API key: 16 hex digits of its SHA-256 (the key cannot be read
    back from it)."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def invalid_api_key() -> APIError:
    """The 401 of a request without a valid key (the OpenAI SDK's AuthenticationError)."""
    return APIError(401, "Incorrect or missing API key.", code="invalid_api_key")


@dataclass(frozen=True)
class Access:
    """What one HTTP request may do: refused (401), trusted (sees ``/health`` details),
    and the owner of its key (None without a valid API key)."""

    refused: bool
    trusted: bool
    owner: str | None


@dataclass(frozen=True)
class Auth:
    """The server's API keys and the rules that read them."""

    api_keys: frozenset[str] = frozenset()
    metrics_keys: frozenset[str] = frozenset()

    @classmethod
    def from_keys(cls, api_keys: Iterable[str], metrics_key: str | None = None) -> Auth:
        keys = frozenset(api_keys)
        return cls(keys, frozenset({metrics_key}) if metrics_key else keys)

    @classmethod
    def from_settings(cls, settings: Settings) -> Auth:
        return cls.from_keys(settings.auth.all_api_keys(), settings.auth.metrics_key)

    def owner(self, key: str) -> str | None:
        """The owner of ``key`` if it is an API key (a metrics key owns nothing)."""
        return owner_of(key) if key in self.api_keys else None

    def check_http(self, method: str, path: str, key: str) -> Access:
        """Whether a request to ``path`` with ``key`` ('' for none) is refused.

        CORS preflights (OPTIONS) carry no credentials and are never refused.
        """
        trusted = not (self.api_keys or self.metrics_keys) or (
            bool(key) and (key in self.api_keys or key in self.metrics_keys))
        if method == "OPTIONS":
            refused = False
        elif path == METRICS_PATH:
            refused = bool(self.metrics_keys) and key not in self.metrics_keys
        else:
            refused = bool(self.api_keys) and not is_open_path(path) and key not in self.api_keys
        return Access(refused, trusted, None if refused else self.owner(key))

    def check_request(self, conn: HTTPConnection) -> Access:
        """``check_http`` for a request, with its Bearer key."""
        key = bearer_key(conn.headers.get("authorization", ""))
        return self.check_http(conn.scope.get("method", ""), conn.url.path, key)

    def check_websocket(self, conn: HTTPConnection) -> tuple[bool, str | None]:
        """(accepted, owner) of a WebSocket handshake: the Bearer header, else
        ``?api_key=``."""
        if not self.api_keys:
            return True, None
        key = bearer_key(conn.headers.get("authorization", "")) or \
            conn.query_params.get("api_key", "")
        owner = self.owner(key)
        return owner is not None, owner
