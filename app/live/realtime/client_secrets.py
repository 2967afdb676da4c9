"""Client secrets: short-lived credentials a server hands a browser instead of its key.

``POST /v1/realtime/translations/client_secrets`` (with an API key) mints one; a browser
opens the realtime session with it as its Bearer credential (or ``?api_key=``). A secret
is signed, not stored: ``ek_`` + the payload (the minting key's owner id, the expiry and
the session configuration it starts with) + an HMAC-SHA256 under a key derived from the
API key that minted it. So a secret works on every replica that has the same keys, stops
working when its key is removed from the server, and a forged or altered one fails the
signature; an expired one is refused by its expiry. Without API keys (an open server) the
secrets are signed with a key made when the process starts.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

PREFIX = "ek_"
MAX_SECRET_CHARS = 4096  # a longer credential is not one of ours
MIN_TTL_S, MAX_TTL_S, DEFAULT_TTL_S = 10, 7200, 600  # OpenAI's bounds and default
_CONTEXT = b"livetrans realtime translation client secret"


class SecretRefused(ValueError):
    """A credential that is no valid client secret; ``code`` says which way."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Grant:
    """What a valid secret admits: its minting key's owner and its session's settings."""

    owner: str | None
    session: dict[str, Any]
    expires_at: int


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _owner(key: str) -> str:
    # app.api.http.auth.owner_of: 16 hex digits of the key's SHA-256
    return hashlib.sha256(key.encode()).hexdigest()[:16]


class ClientSecrets:
    """Mints and reads client secrets under the server's API keys."""

    def __init__(self, api_keys: Iterable[str]) -> None:
        keys = list(api_keys)
        self._keys = {_owner(k): k for k in keys}
        self._open_key = secrets.token_bytes(32)  # an open server's, for this process

    def _signing_key(self, owner: str) -> bytes | None:
        if not self._keys:
            return self._open_key
        key = self._keys.get(owner)
        return None if key is None else hmac.new(key.encode(), _CONTEXT,
                                                 hashlib.sha256).digest()

    def mint(self, api_key: str, session: dict[str, Any], expires_at: int) -> str:
        """A secret for ``session`` until ``expires_at`` (Unix seconds), under
        ``api_key`` (one of the server's keys; anything on an open server)."""
        owner = _owner(api_key) if self._keys else ""
        signing = self._signing_key(owner)
        assert signing is not None, "mint with one of the server's API keys"
        payload = _b64(json.dumps({"o": owner, "e": expires_at, "s": session},
                                  separators=(",", ":")).encode())
        mac = _b64(hmac.new(signing, payload.encode(), hashlib.sha256).digest())
        return f"{PREFIX}{payload}.{mac}"

    def read(self, value: str, now: float) -> Grant:
        """The grant of a secret, or ``SecretRefused`` (forged, altered, expired, or
        minted under a key this server no longer has)."""
        if not value.startswith(PREFIX) or len(value) > MAX_SECRET_CHARS \
                or value.count(".") != 1:
            raise SecretRefused("invalid_client_secret", "the client secret is not valid")
        payload, mac = value[len(PREFIX):].split(".")
        try:
            claims = json.loads(_unb64(payload))
            given = _unb64(mac)
        except (ValueError, binascii.Error, RecursionError):
            raise SecretRefused("invalid_client_secret",
                                "the client secret is not valid") from None
        if not isinstance(claims, dict) or not isinstance(claims.get("o"), str) \
                or type(claims.get("e")) is not int or not isinstance(claims.get("s"), dict):
            raise SecretRefused("invalid_client_secret", "the client secret is not valid")
        signing = self._signing_key(claims["o"])
        expected = (hmac.new(signing, payload.encode(), hashlib.sha256).digest()
                    if signing is not None else b"")
        if not signing or not hmac.compare_digest(expected, given):
            raise SecretRefused("invalid_client_secret", "the client secret is not valid")
        if claims["e"] <= now:
            raise SecretRefused("client_secret_expired", "the client secret has expired; "
                                "mint a new one")
        return Grant(claims["o"] or None, claims["s"], claims["e"])
