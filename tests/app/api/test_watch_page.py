"""The caption screen (/watch) and the operator page (/live) of an event, in headless Chromium.

A server with an API key; one speaker replays the first utterances of a recorded ASR stream
into a room with two target languages; three viewers (two German, one Japanese) watch the
room on /watch with the room's viewer token, one of them joining mid-talk. Every viewer must
show every final caption of its language exactly once, in segment order, with the text the
speaker received. The screenshots (1920x1080 and 390x844) kept in tests/artifacts/ are the
reference images; a run writes its own to a temporary folder, and replaces the references
only with ``LIVETRANS_UPDATE_REFERENCES=1`` (so a test run leaves the tree clean).

Debian's ``chromium`` driven by Playwright, like test_live_page.py; skipped without them,
and skipped when the server has no ``/v1/live/watch`` route.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import LiveServer

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = (Path(__file__).resolve().parents[2] / "artifacts"
             if os.environ.get("LIVETRANS_UPDATE_REFERENCES") == "1"
             else Path(tempfile.gettempdir()) / "livetrans-screenshots")
ARTIFACTS.mkdir(parents=True, exist_ok=True)
KEY = "watch-test-key"
ROOM = "keynote-1"
LANGS = ["de", "ja"]
WAIT_MS = 300_000  # generous: a bound against hanging, never a latency assertion

pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="Debian package 'chromium' is not installed")


@pytest.fixture(scope="module")
def keyed_server():
    with LiveServer(api_keys=[KEY], max_source_chars=2000, queue_size=64) as server:
        if not has_watch_route(server):
            pytest.skip("this server has no WebSocket /v1/live/watch yet")
        yield server


def has_watch_route(server: LiveServer) -> bool:
    """A missing WebSocket route is a refused handshake; the route answers a frame."""
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    url = server.url.replace("http://", "ws://") + "/v1/live/watch?room=probe&lang=de"
    try:
        with connect(url, open_timeout=30) as ws:
            ws.recv(timeout=30)
    except InvalidStatus:
        return False
    return True


def asr_events(data_dir: Path, utterances: int = 3, partials: int = 3) -> list[dict]:
    """The first utterances of the ACL 60/60 dev stream, thinned: a few partials + final each."""
    src = data_dir / "asr_partials" / "acl6060_dev_en.jsonl"
    events: list[dict] = []
    for segment, line in enumerate(src.read_text().splitlines()[:utterances]):
        utt = json.loads(line)
        part = [e for e in utt["events"] if e["type"] == "partial"]
        final = [e for e in utt["events"] if e["type"] == "final"][-1]
        step = max(1, len(part) // partials)
        for ev in [*part[step - 1::step][:partials], final]:
            events.append({"type": ev["type"], "segment": segment, "text": ev["text"]})
    return events


def finals_on(page) -> list[tuple[int, str]]:
    """(segment, text) of each final line the caption screen shows, top to bottom."""
    return [tuple(x) for x in page.eval_on_selector_all(
        '#finals [data-final="1"]',
        "els => els.map(e => [Number(e.dataset.segment), e.textContent])")]


def test_viewers_see_every_final_of_their_language_once_in_order(
        keyed_server, chromium, data_dir) -> None:
    from websockets.sync.client import connect

    events = asr_events(data_dir)
    ws_url = keyed_server.url.replace("http://", "ws://") + "/v1/live"
    with connect(ws_url, additional_headers={"Authorization": f"Bearer {KEY}"},
                 open_timeout=60, max_size=None) as speaker:
        speaker.send(json.dumps({"type": "start", "target_langs": LANGS, "room": ROOM}))
        ready = json.loads(speaker.recv(timeout=60))
        assert ready["type"] == "ready", ready
        assert ready["room"] == ROOM
        token = ready["viewer_token"]

        viewers = []  # (lang, context, page, screenshot name)

        def open_viewer(lang: str, viewport: tuple[int, int], name: str) -> None:
            context = chromium.new_context(
                viewport={"width": viewport[0], "height": viewport[1]},
                has_touch=viewport[0] < 600, reduced_motion="reduce")  # no fade: stills
            page = context.new_page()
            page.goto(f"{keyed_server.url}/watch?room={ROOM}&lang={lang}&token={token}")
            page.wait_for_selector('body[data-state="live"]', timeout=WAIT_MS)
            viewers.append((lang, context, page, name))

        # two viewers from the start; the third joins mid-talk (its first finals come in
        # `joined.recent`, the rest live: each must still show up exactly once)
        open_viewer("de", (1920, 1080), "watch_1920x1080.png")
        open_viewer("ja", (390, 844), "watch_ja_390x844.png")

        def speak() -> None:
            for ev in events:
                speaker.send(json.dumps(ev))
                time.sleep(0.25)
            speaker.send(json.dumps({"type": "stop"}))

        sender = threading.Thread(target=speak, daemon=True)
        sender.start()
        captions, errors = [], []
        while True:
            msg = json.loads(speaker.recv(timeout=WAIT_MS / 1000))
            if msg["type"] == "done":
                break
            (captions if msg["type"] == "caption" else errors).append(msg)
            if len(viewers) == 2 and msg["type"] == "caption" and msg["final"] and \
                    msg["lang"] == "de":
                open_viewer("de", (390, 844), "watch_390x844.png")
        sender.join()
        assert len(viewers) == 3

    assert not errors, errors
    expected = {lang: [(c["segment"], c["display_text"]) for c in captions
                       if c["final"] and c["lang"] == lang] for lang in LANGS}
    segments = sorted({e["segment"] for e in events})
    for lang in LANGS:  # the speaker got one final per segment and language
        assert [seg for seg, _ in expected[lang]] == segments, lang

    ARTIFACTS.mkdir(exist_ok=True)
    for lang, context, page, name in viewers:
        page.wait_for_function(
            f"document.querySelectorAll('#finals [data-final=\"1\"]').length >= {len(segments)}",
            timeout=WAIT_MS)
        page.wait_for_selector('body[data-ended="1"]', timeout=WAIT_MS)
        assert finals_on(page) == expected[lang], lang
        # the live region announces finals only; the partial line is hidden from it
        assert page.get_attribute("#finals", "aria-live") == "polite"
        if name:
            if name == "watch_390x844.png":
                page.tap("#box")  # a touch shows the controls
                page.wait_for_selector("body:not(.idle)")
            else:  # the audience's view: controls hidden after a quiet moment
                page.wait_for_selector("body.idle", timeout=WAIT_MS)
            page.screenshot(path=str(ARTIFACTS / name))
        context.close()


def test_caption_screen_controls_and_language_switch(keyed_server, chromium) -> None:
    """Theme, font size and language switching work without a talk; a bad token is shown."""
    context = chromium.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.goto(f"{keyed_server.url}/watch?room=no-such-room&lang=de&token=wrong")
    page.wait_for_selector('body:not([data-state="connecting"])', timeout=WAIT_MS)
    assert page.text_content("#status-text").strip()
    page.mouse.move(10, 10)
    page.select_option("#theme", "contrast")
    assert page.get_attribute("html", "data-theme") == "contrast"
    before = page.evaluate("getComputedStyle(document.getElementById('box')).fontSize")
    page.click("#larger")
    after = page.evaluate("getComputedStyle(document.getElementById('box')).fontSize")
    assert float(after.rstrip("px")) > float(before.rstrip("px"))
    page.select_option("#lang", "ja")
    assert "lang=ja" in page.url
    assert page.get_attribute("html", "lang") == "ja"
    # caption text is text, never markup
    html = "<img src=x onerror=\"document.title='pwned'\"><b>bold</b>"
    page.evaluate("t => onCaption({segment: 7, final: true, lang: 'ja', display_text: t})", html)
    assert finals_on(page) == [(7, html)]
    assert page.locator("#finals img, #finals b").count() == 0
    context.close()


def test_caption_screen_shows_committed_words_first_and_never_takes_them_back(
        keyed_server, chromium) -> None:
    """A room in append mode: the partial line starts with the segment's committed words
    (``commit`` frames), followed by what the latest partial shows past them."""
    context = chromium.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.goto(f"{keyed_server.url}/watch?room=no-such-room&lang=de&token=wrong")
    page.wait_for_selector('body:not([data-state="connecting"])', timeout=WAIT_MS)

    def partial() -> tuple[str, str]:
        return (page.text_content("#partial") or "",
                page.text_content("#partial .committed") or ""
                if page.locator("#partial .committed").count() else "")

    page.evaluate("() => onCaption({segment: 4, final: false, lang: 'de', "
                  "display_text: 'Der Hund'})")
    assert partial() == ("Der Hund", "")
    page.evaluate("() => onCommit({type: 'commit', segment: 4, lang: 'de', text: 'Der'})")
    assert partial() == ("Der Hund", "Der")
    page.evaluate("() => onCaption({segment: 4, final: false, lang: 'de', "
                  "display_text: 'Die Katze läuft'})")
    assert partial() == ("Der", "Der")  # the partial says otherwise: committed stays
    page.evaluate("() => onCommit({type: 'commit', segment: 4, lang: 'ja', text: 'x'})")
    page.evaluate("() => onCaption({segment: 4, final: false, lang: 'de', "
                  "display_text: 'Der Hund läuft <b>schnell</b>'})")
    assert partial() == ("Der Hund läuft <b>schnell</b>", "Der")  # text, never markup
    page.evaluate("() => onCaption({segment: 4, final: true, lang: 'de', "
                  "display_text: 'Der Hund läuft.'})")
    page.evaluate("() => onCommit({type: 'commit', segment: 4, lang: 'de', text: 'late'})")
    assert finals_on(page) == [(4, "Der Hund läuft.")]
    assert partial()[0] == ""
    context.close()


def test_operator_page_with_an_api_key(keyed_server, chromium, data_dir, tmp_path) -> None:
    """A wrong key is shown as an error; the right key connects, the room's viewer links
    point at /watch with the talk's viewer token, the transcript link downloads the talk's
    finals, and once the talk is over its token admits to no later talk in the room (the
    next talk gets a new one)."""
    stream = tmp_path / "one.jsonl"
    utt = json.loads((data_dir / "asr_partials" / "acl6060_dev_en.jsonl")
                     .read_text().splitlines()[2])
    utt["events"] = [{**e, "t": 0.1 * i} for i, e in enumerate(utt["events"][-2:])]
    stream.write_text(json.dumps(utt) + "\n")

    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(keyed_server.url + "/live?speed=4")

    # Speak in a browser with no microphone (or no speech recognition) says why it cannot
    page.click("#mic")
    page.wait_for_selector("#errors li", timeout=WAIT_MS)
    assert "Speak" in page.text_content("#errors")

    page.set_input_files("#file", str(stream))
    page.fill("#apikey", "not-the-key")
    page.click("#replay")
    page.wait_for_function(
        "document.getElementById('errors').textContent.includes('1008')", timeout=WAIT_MS)
    assert "API key" in page.text_content("#errors")

    page.fill("#apikey", KEY)
    page.check('#targets input[value="ja"]')
    page.fill("#room", "ops-room")
    page.click("#replay")
    for lang in LANGS:
        page.wait_for_selector(f'#captions .cell[data-lang="{lang}"][data-final="1"]',
                               timeout=WAIT_MS)
    assert page.text_content("#errors").strip() == ""
    # one grid row per segment holding the source and both languages
    cells = page.eval_on_selector_all(
        '#captions .seg[data-segment="0"] .cell', "els => els.map(e => e.dataset.lang || 'src')")
    assert cells == ["src", *LANGS]
    href = page.get_attribute('#viewers a[data-lang="de"]', "href")
    assert "/watch?room=ops-room&lang=de&token=" in href
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "live_operator.png"))

    page.wait_for_selector('#status:text("done")', timeout=WAIT_MS)
    operator_final = page.text_content('#captions .cell[data-lang="de"][data-final="1"]')

    # the talk's transcript, through the operator page's link (viewer token, never the key)
    link = page.get_attribute('#transcript-links a[data-lang="de"]', "href")
    assert "token=" in link and KEY not in link
    transcript = page.request.get(keyed_server.url + link.replace("format=vtt", "format=json"))
    assert transcript.ok, transcript.text()
    assert [x["text"] for x in transcript.json()["lines"]] == [operator_final]

    # the talk is over: its token admits to no later talk in the room (another tenant's);
    # the screen shows the ended talk's last lines (its transcript still admits the token)
    viewer = context.new_page()
    viewer.goto(href)
    viewer.wait_for_selector('body[data-ended="1"] #ended:not([hidden])', timeout=WAIT_MS)
    assert "that talk only" in viewer.inner_text("#ended-next")
    assert viewer.inner_text('#finals [data-final="1"]') == operator_final
    page.click("#replay")
    page.wait_for_function(
        f"(document.querySelector('#viewers a[data-lang=\"de\"]') || {{}}).href "
        f"&& !document.querySelector('#viewers a[data-lang=\"de\"]').href.endsWith("
        f"{json.dumps(href.split('token=')[1])})", timeout=WAIT_MS)
    page.wait_for_selector('#captions .cell[data-lang="de"][data-final="1"]', timeout=WAIT_MS)
    context.close()
