"""``WebSocket /v1/live``: the speakers' route (API.md, "Live captions"), and
``GET /live/languages``: the languages the operator page (``/live``) may offer.

The route checks the origin and the API key, then hands the socket to the live subsystem
(``app.live.connection.serve``) with what it may use of the server (``LiveServices``);
admission, the reader, the fan-out and the publisher are the subsystem's.

The languages are the server's, never a list in the page: on ``serve --langs en,de`` the
page offers English and German only, so an organiser cannot pick a language that would be
refused (``language_not_served``). The route is open (as ``/live`` is): which languages an
event serves is no secret, and the page asks before anyone typed a key.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, WebSocket

from app.api.http.origins import origin_allowed
from app.api.state import ServerState
from app.live.connection import refuse, serve
from app.live.limits import CLOSE_POLICY
from app.translation.prompts import LANGUAGE_NAMES

router = APIRouter()


@router.websocket("/v1/live")
async def live(ws: WebSocket) -> None:
    state: ServerState = ws.app.state.livetrans
    if not origin_allowed(ws, state.settings):
        await refuse(ws, CLOSE_POLICY, "origin not allowed")
        return
    accepted, owner = state.auth.check_websocket(ws)
    if not accepted:
        await refuse(ws, CLOSE_POLICY, "invalid API key")
        return
    await serve(ws, state.live_services(), owner)


def served_languages(state: ServerState) -> tuple[list[str], bool]:
    """The languages this server translates, in the prompts' order, and whether that is
    settled. While the model loads, ``--langs`` says it already; without ``--langs`` a
    loading model may still turn out trimmed to fewer (``served_langs`` is known once it
    loaded), so the list is not settled until then."""
    served = state.served_langs
    settled = state.translator is not None or state.load_error is not None
    if served is None and state.settings.languages.langs:
        served, settled = frozenset(state.settings.languages.langs), True
    if served is None:
        return list(LANGUAGE_NAMES), settled
    return [lang for lang in LANGUAGE_NAMES if lang in served], settled


@router.get("/live/languages", include_in_schema=False)
async def live_languages(request: Request) -> dict[str, object]:
    """``{"languages": [{"code": "de", "name": "German"}, ...], "settled": bool}``: what
    the operator page offers as source and target languages (``settled`` false: the model
    still loads and the list may narrow; ask again)."""
    langs, settled = served_languages(request.app.state.livetrans)
    return {"languages": [{"code": lang, "name": LANGUAGE_NAMES[lang]} for lang in langs],
            "settled": settled}
