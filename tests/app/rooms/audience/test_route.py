"""Audience QR codes: ``GET /v1/rooms/{room}/qr``, the operator page's codes and the
printable page.

The route on the real app without a model (a talk is a claim in the room registry, as a
speaker's connection makes it): who gets which link, every refusal in OpenAI's error shape.
Then with real clients: the route's own SVG rendered by Chromium and decoded by zxing-cpp
to the viewer link; and a keyed server with a model, where the operator page (/live)
starts a talk in a room, shows each language's code large, links the printable page, and
every code on both pages decodes to the caption screen's link with the talk's viewer
token, which then admits a viewer; and the printable page before any talk, with a room
viewer token the operator issued, whose codes' link admits a viewer who waits for the talk
and then sees its captions (room tokens themselves: test_viewer_tokens.py). Debian's
``chromium`` driven by Playwright, like test_watch_page.py; the browser tests are skipped
without them.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import tempfile
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient

from app.rooms.bus import BusUnavailable
from app.rooms.bus.local import LocalBus
from app.server import create_app
from app.settings import Settings
from tests.app.api.pixels import decode_qr
from tests.conftest import LiveServer

LOOPBACK = "http://127.0.0.1"  # a name the server answers to (--allowed-hosts)
KEY = "qr-operator-key"
ROOM = "keynote-1"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# screenshots for a look; kept as references only with LIVETRANS_UPDATE_REFERENCES=1
ARTIFACTS = (Path(__file__).resolve().parents[2] / "artifacts"
             if os.environ.get("LIVETRANS_UPDATE_REFERENCES") == "1"
             else Path(tempfile.gettempdir()) / "livetrans-screenshots")
WAIT_MS = 300_000  # generous: a bound against hanging, never a latency assertion
needs_chromium = pytest.mark.skipif(CHROMIUM is None,
                                    reason="Debian package 'chromium' is not installed")


def _client(api_keys: list[str] | None = None, **settings) -> TestClient:
    app = create_app(Settings(api_keys=api_keys or [], **settings))  # no lifespan: no model
    return TestClient(app, base_url=LOOPBACK)


def _rooms(client: TestClient):
    return client.app.state.livetrans.rooms  # type: ignore[attr-defined]


def _talk(client: TestClient, room: str = ROOM, langs: tuple[str, ...] = ("de", "ja")):
    """A talk in ``room``, claimed as a speaker's connection claims it."""
    speaker = object()
    return speaker, _rooms(client).claim(room, speaker, list(langs))


def _qr(client: TestClient, room: str = ROOM, headers: dict | None = None, **query: str):
    return client.get(f"/v1/rooms/{room}/qr", params=query, headers=headers or {})


def _error(response, status: int, code: str, param: str | None = None) -> str:
    assert response.status_code == status, response.text
    body = response.json()["error"]
    assert body["code"] == code and set(body) == {"message", "type", "param", "code"}
    if param is not None:
        assert body["param"] == param
    return body["message"]


# -- a server without API keys -------------------------------------------------------------
def test_the_code_of_a_running_talk_is_an_svg_of_its_viewer_link() -> None:
    client = _client()
    _, room = _talk(client)
    r = _qr(client, lang="DE")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "image/svg+xml"
    assert r.headers["cache-control"] == "no-store"
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["content-security-policy"] == "default-src 'none'"
    assert r.headers["x-livetrans-talk"] == room.talk_id
    assert r.headers["x-livetrans-link"] == f"{LOOPBACK}/watch?room={ROOM}&lang=de"
    assert r.content.startswith(b"<svg ") and b"Live captions of keynote-1 in German" in \
        r.content


def test_the_link_starts_with_the_public_url_when_one_is_set() -> None:
    client = _client(public_url="https://captions.example.org/events/")
    _talk(client)
    r = _qr(client, lang="ja")
    assert r.headers["x-livetrans-link"] == \
        f"https://captions.example.org/events/watch?room={ROOM}&lang=ja"


def test_without_a_public_url_the_link_follows_the_request() -> None:
    client = _client(host="0.0.0.0")  # any Host is allowed: a deployment's default
    _talk(client)
    r = _qr(client, lang="de", headers={"host": "captions.example.org:8443"})
    assert r.headers["x-livetrans-link"] == \
        f"http://captions.example.org:8443/watch?room={ROOM}&lang=de"
    # a Host that is no host name never reaches the link (Starlette falls back to the
    # server's own address; a base that is still no plain link would be 400 invalid_host)
    r = _qr(client, lang="de", headers={"host": 'evil"><svg onload=x>'})
    assert r.status_code == 200 and "evil" not in r.headers["x-livetrans-link"]


def test_unknown_rooms_and_languages_are_404_with_the_viewer_routes_codes() -> None:
    client = _client()
    _talk(client)
    _rooms(client).join("waiting-room", "de", max_viewers=10, max_per_room=10)
    for room in ("no-such-room", "waiting-room"):  # a room without a talk now: printed ahead
        r = _qr(client, room=room, lang="fr")
        assert r.status_code == 200 and "x-livetrans-talk" not in r.headers
        assert r.headers["x-livetrans-link"] == f"{LOOPBACK}/watch?room={room}&lang=fr"
    message = _error(_qr(client, room="-bad" + "x" * 100, lang="de"), 404, "invalid_room",
                     "room")
    assert len(message) < 300
    message = _error(_qr(client, lang="xx\x00<b>"), 404, "unsupported_language", "lang")
    assert "\x00" not in message
    assert "de, ja" in _error(_qr(client, lang="fr"), 404, "lang_not_in_room", "lang")
    assert _qr(client, lang="").status_code == 404
    assert _qr(client).status_code == 400  # lang is required (the server's validation error)


def test_a_room_bus_that_cannot_be_asked_is_503_with_retry_after() -> None:
    class DownBus(LocalBus):
        shared = True

        async def current_talk(self, room: str):
            raise BusUnavailable("down")

    client = _client()
    client.app.state.livetrans.bus = DownBus()  # type: ignore[attr-defined]
    r = _qr(client, lang="de")
    _error(r, 503, "room_bus_unavailable")
    assert r.headers["retry-after"] == "5"


# -- a server with API keys: an API key, or the current talk's viewer token ------------------
def test_with_keys_the_talks_viewer_token_gets_the_code_with_that_token() -> None:
    client = _client([KEY])
    _, room = _talk(client)
    token = _rooms(client).token(ROOM, room.talk_id)
    r = _qr(client, lang="de", token=token)
    assert r.status_code == 200, r.text
    query = parse_qs(urlsplit(r.headers["x-livetrans-link"]).query)
    assert query == {"room": [ROOM], "lang": ["de"], "token": [token]}
    # the operator, by API key, gets the same link
    r = _qr(client, lang="de", headers={"Authorization": f"Bearer {KEY}"})
    assert parse_qs(urlsplit(r.headers["x-livetrans-link"]).query)["token"] == [token]
    # the middleware lets the route answer for itself; the pages are open
    for path in ("/live/print", "/pages/qr.js"):
        page = client.get(path)
        assert page.status_code == 200 and page.headers["content-type"].startswith(
            "text/html" if path.endswith("print") else "text/javascript")


def test_with_keys_anything_but_the_current_talks_token_is_401() -> None:
    client = _client([KEY])
    rooms = _rooms(client)
    speaker, old = _talk(client)
    old_token = rooms.token(ROOM, old.talk_id)
    rooms.release(old, speaker)
    _, new = _talk(client)  # the room's next talk (another tenant's, perhaps)
    for token in (old_token, "0" * 32, "é\x00" * 40, ""):
        message = _error(_qr(client, lang="de", token=token), 401, "invalid_token", "token")
        assert "viewer token" in message
    _error(_qr(client, lang="de", headers={"Authorization": "Bearer wrong"}), 401,
           "invalid_token")
    # without access, a room without a talk is 401 too: its existence is not told
    _error(_qr(client, room="no-such-room", lang="de", token=old_token), 401, "invalid_token")
    _error(_qr(client, room="no-such-room", lang="de"), 401, "invalid_token")
    # the operator learns that it has none, and how to get a code printed ahead
    _error(_qr(client, room="no-such-room", lang="de",
               headers={"Authorization": f"Bearer {KEY}"}), 400, "viewer_token_required",
           "token")
    # a token of one room opens no other
    _talk(client, "other-room")
    _error(_qr(client, room="other-room", lang="de", token=rooms.token(ROOM, new.talk_id)),
           401, "invalid_token")


# -- real clients: Chromium draws the route's SVG, zxing-cpp reads it ------------------------
@needs_chromium
def test_the_routes_svg_drawn_by_chromium_decodes_to_the_viewer_link(chromium) -> None:
    client = _client([KEY], public_url="https://captions.example.org")
    _, room = _talk(client)
    token = _rooms(client).token(ROOM, room.talk_id)
    r = _qr(client, lang="ja", token=token)
    assert r.status_code == 200, r.text
    link = r.headers["x-livetrans-link"]
    assert link == f"https://captions.example.org/watch?room={ROOM}&lang=ja&token={token}"
    data = base64.b64encode(r.content).decode()
    page = chromium.new_page(viewport={"width": 900, "height": 900})
    # as an image at its own size, and small (a phone showing the operator's page)
    for width in ("auto", "180px"):
        page.set_content(f'<body style="margin:20px;background:#fff"><img id="qr" '
                         f'style="width:{width}" src="data:image/svg+xml;base64,{data}"></body>')
        page.wait_for_function("document.getElementById('qr').complete")
        assert decode_qr(page.locator("#qr").screenshot()) == [link], width
    page.close()


# -- the operator page and the printable page, on a server with keys and a model -------------
@pytest.fixture(scope="module")
def keyed_server():
    with LiveServer(api_keys=[KEY], max_source_chars=2000, queue_size=64) as server:
        yield server


def _waiting_stream(tmp_path: Path) -> Path:
    """One utterance whose first event is an hour away: the talk stays open, idle (no
    translation needed) while the test looks at its codes."""
    stream = tmp_path / "idle.jsonl"
    stream.write_text(json.dumps({"events": [
        {"t": 3600.0, "type": "partial", "text": "Good morning"},
        {"t": 3601.0, "type": "final", "text": "Good morning everyone."}]}) + "\n")
    return stream


@needs_chromium
def test_the_operator_page_shows_codes_to_project_and_a_printable_page(
        keyed_server, chromium, tmp_path) -> None:
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(keyed_server.url + "/live")
    page.set_input_files("#file", str(_waiting_stream(tmp_path)))
    page.fill("#apikey", KEY)
    page.check('#targets input[value="ja"]')
    page.fill("#room", "qr-room")
    page.click("#replay")
    page.wait_for_selector("#viewers:not([hidden]) #show-qr", timeout=WAIT_MS)
    token = parse_qs(urlsplit(page.get_attribute('#viewers a[data-lang="de"]', "href"))
                     .query)["token"][0]
    expected = {lang: f"{keyed_server.url}/watch?room=qr-room&lang={lang}&token={token}"
                for lang in ("de", "ja")}

    page.click("#show-qr")
    page.wait_for_selector('#qr-panel[data-state="ready"]', timeout=WAIT_MS)
    assert page.text_content("#qr-errors").strip() == ""
    for lang, link in expected.items():
        img = page.locator(f'#qr-codes img[data-lang="{lang}"]')
        box = img.bounding_box()
        assert box is not None and box["width"] >= 500 and box["height"] >= 500, box  # large
        assert box["x"] >= 0 and box["y"] >= 0 and box["x"] + box["width"] <= 1280 and \
            box["y"] + box["height"] <= 800, box  # and whole, side by side in the window
        assert decode_qr(img.screenshot()) == [link]
        assert page.text_content(f'#qr-codes figure[data-lang="{lang}"] .qr-link') == link
    assert KEY not in page.get_attribute("#qr-print", "href")  # the token, never the key
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "live_qr_codes.png"))
    page.keyboard.press("Escape")
    assert page.locator("#qr-panel").is_hidden()

    # the printable page: the room's codes, one per language, each with its link in print
    printable = context.new_page()
    printable.goto(keyed_server.url + page.get_attribute("#print-link", "href"))
    printable.wait_for_selector('body[data-state="ready"]', timeout=WAIT_MS)
    assert printable.text_content("#title") == "Live captions · qr-room"
    assert printable.is_hidden("#valid")  # a talk's token: no expiry to print
    for lang, link in expected.items():
        assert decode_qr(printable.locator(f'img[data-lang="{lang}"]').screenshot()) == [link]
    assert printable.text_content("#errors").strip() == ""
    printable.emulate_media(media="print")
    printable.screenshot(path=str(ARTIFACTS / "print_page.png"), full_page=True)
    assert sorted(decode_qr(printable.screenshot(full_page=True))) == sorted(expected.values())
    # without a list of languages it finds the talk's own
    printable.goto(f"{keyed_server.url}/live/print?room=qr-room&token={token}")
    printable.wait_for_selector('body[data-state="ready"]', timeout=WAIT_MS)
    assert printable.eval_on_selector_all("figure.qr", "fs => fs.map(f => f.dataset.lang)") \
        == ["de", "ja"]
    # a token of no talk: the page says why, and shows no code
    printable.goto(f"{keyed_server.url}/live/print?room=qr-room&langs=de&token={'0' * 32}")
    printable.wait_for_selector('body[data-state="error"]', timeout=WAIT_MS)
    assert "viewer token" in printable.text_content("#errors")
    assert printable.locator("figure.qr").count() == 0

    # the link a code holds admits a viewer to the talk
    viewer = context.new_page()
    viewer.goto(expected["ja"])
    viewer.wait_for_selector('body[data-state="live"]', timeout=WAIT_MS)
    page.click("#stop")
    context.close()


@needs_chromium
def test_codes_printed_before_the_first_talk_admit_to_the_talks_that_follow(
        keyed_server, chromium) -> None:
    """The organiser's story: a room token issued and its page printed days ahead; on the
    day, a phone scans the poster before the talk, waits, and reads the captions."""
    import httpx
    from websockets.sync.client import connect

    room = "printed-ahead"
    r = httpx.post(f"{keyed_server.url}/v1/rooms/{room}/viewer-tokens",
                   json={"expires_in": 3600, "langs": ["de", "ja"]},
                   headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    assert r.status_code == 201, r.text
    issued = r.json()
    token = issued["token"]
    expected = {lang: f"{keyed_server.url}/watch?room={room}&lang={lang}&token={token}"
                for lang in ("de", "ja")}
    assert issued["links"] == expected
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    printable = context.new_page()
    printable.goto(issued["print_url"] + "&langs=de,ja")
    printable.wait_for_selector('body[data-state="ready"]', timeout=WAIT_MS)
    assert printable.text_content("#errors").strip() == ""
    printable.emulate_media(media="print")
    assert sorted(decode_qr(printable.screenshot(full_page=True))) == sorted(expected.values())
    for lang, link in expected.items():
        assert printable.text_content(f'figure[data-lang="{lang}"] .qr-link') == link
    # the sheet says until when its codes work
    assert printable.is_visible("#valid")
    assert printable.get_attribute("#valid", "data-expires") == str(issued["expires_at"])
    assert printable.text_content("#valid").startswith("Valid until ")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    printable.screenshot(path=str(ARTIFACTS / "print_page_ahead.png"), full_page=True)

    # a phone scans the poster before the talk: it waits for it
    viewer = context.new_page()
    viewer.goto(expected["de"])
    viewer.wait_for_selector('body[data-state="live"]', timeout=WAIT_MS)
    ws_url = keyed_server.url.replace("http://", "ws://") + "/v1/live"
    with connect(ws_url, additional_headers={"Authorization": f"Bearer {KEY}"},
                 open_timeout=60) as speaker:
        speaker.send(json.dumps({"type": "start", "target_langs": ["de"], "room": room}))
        assert json.loads(speaker.recv(timeout=60))["type"] == "ready"
        speaker.send(json.dumps({"type": "final", "segment": 0, "text": "Good morning."}))
        speaker.send(json.dumps({"type": "stop"}))
        final = None
        while True:
            msg = json.loads(speaker.recv(timeout=WAIT_MS / 1000))
            if msg["type"] == "caption" and msg["final"]:
                final = msg
            if msg["type"] == "done":
                break
    assert final is not None
    viewer.wait_for_selector('#finals [data-final="1"]', timeout=WAIT_MS)
    assert viewer.text_content('#finals [data-final="1"]') == final["display_text"]

    # revoked: the printed code no longer opens the room
    r = httpx.delete(f"{keyed_server.url}/v1/rooms/{room}/viewer-tokens/{issued['id']}",
                     headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    assert r.status_code == 200, r.text
    late = context.new_page()
    late.goto(expected["ja"])
    late.wait_for_selector('body[data-state="refused"]', timeout=WAIT_MS)
    context.close()
