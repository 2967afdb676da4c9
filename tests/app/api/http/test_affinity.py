"""The gateway affinity check (``app.api.http.affinity``): only behind the gateway."""

from __future__ import annotations

import pytest

from app.api.errors import APIError
from app.api.http.affinity import check_session_affinity


def test_affinity_check_only_behind_the_gateway() -> None:
    gw = {"x-livetrans-gateway": "nginx"}
    check_session_affinity({}, "s-1")  # no gateway: nothing to check
    check_session_affinity(gw, None)  # no session
    check_session_affinity({**gw, "x-livetrans-routed-session": "s-1"}, "s-1")
    for headers in (gw, {**gw, "x-livetrans-routed-session": "s-2"}):
        with pytest.raises(APIError) as exc:
            check_session_affinity(headers, "s-1")
        assert (exc.value.status, exc.value.code) == (400, "session_id_header_required")
