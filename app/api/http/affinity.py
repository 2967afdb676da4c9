"""Session affinity behind the shipped gateway: detect a request routed on the wrong key.

Replicas keep a session's draft in memory, so every update of a session must reach the
same replica. The gateway (``docker/nginx.conf``) hashes on the session the client named,
in the ``X-Session-ID`` header or in the JSON body's ``session_id``, and tells the replica
what it routed on (``X-Livetrans-Routed-Session``, with ``X-Livetrans-Gateway`` marking a
request that came through it). When the session the replica is about to use differs from
that key (a body id the gateway could not read, a header and a body naming two different
sessions), consecutive updates could land on different replicas and silently lose the
draft every other update; refusing the request makes the mistake visible at once.

Without the gateway header (a single server, another load balancer) nothing is checked.
A client cannot use the header to do harm: at worst it gets a 400 for its own request.
"""

from __future__ import annotations

from collections.abc import Mapping

from app.api.errors import APIError

GATEWAY_HEADER = "x-livetrans-gateway"
ROUTED_HEADER = "x-livetrans-routed-session"


def _as_header(value: str) -> str:
    """How a body string looks once it travelled in a header (HTTP headers are bytes;
    Starlette reads them as latin-1)."""
    return value.encode("utf-8", "backslashreplace").decode("latin-1")


def check_session_affinity(headers: Mapping[str, str], session_id: str | None) -> None:
    """Raise a 400 ``session_id_header_required`` if the gateway routed this request on a
    key other than ``session_id``, the session the request will use (body, else header).

    ``headers`` is the request's (case-insensitive) header mapping.
    """
    if session_id is None or headers.get(GATEWAY_HEADER) is None:
        return
    routed = headers.get(ROUTED_HEADER, "")
    if routed == _as_header(session_id):
        return
    raise APIError(
        400,
        "Behind the gateway, the session must be named where the gateway can route on it: "
        "send it in the 'X-Session-ID' header (and, if also in the body, the same value). "
        "The gateway routed this request on a different key, so the session's updates "
        "could reach different replicas.",
        param="session_id", code="session_id_header_required",
    )
