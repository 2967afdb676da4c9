"""The operator page (/live) offers the languages this server serves, from the server
(``GET /live/languages``), never a list of its own: on ``serve --langs en,de`` English and
German only. The route on the app (no model: ``--langs`` says it already), then the page in
Debian's headless Chromium on a real HTTP server without a model (uvicorn, lifespan off).
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.server import create_app
from app.settings import Settings
from tests.conftest import free_port

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run"]
SCREENSHOTS = Path(tempfile.gettempdir()) / "livetrans-screenshots"
WAIT_MS = 60_000  # a bound against hanging


def _client(**settings) -> TestClient:
    return TestClient(create_app(Settings(**settings)),  # no lifespan, no model
                      base_url="http://127.0.0.1")


def test_langs_given_are_the_languages_offered_while_the_model_loads() -> None:
    r = _client(langs=["de", "en"]).get("/live/languages")
    assert r.status_code == 200
    assert r.json() == {"languages": [{"code": "en", "name": "English"},
                                      {"code": "de", "name": "German"}], "settled": True}


def test_without_langs_every_language_until_the_model_says_otherwise() -> None:
    client = _client()
    body = client.get("/live/languages").json()
    assert [x["code"] for x in body["languages"]] == \
        ["en", "de", "fr", "es", "it", "pt", "uk", "ru", "zh", "ja"]
    assert body["settled"] is False  # a loading model may turn out trimmed
    state = client.app.state.livetrans
    state.served_langs = frozenset({"ja", "en"})  # a model trimmed to en, ja has loaded
    state.translator = object()
    assert client.get("/live/languages").json() == {
        "languages": [{"code": "en", "name": "English"}, {"code": "ja", "name": "Japanese"}],
        "settled": True}


def test_the_route_is_open_like_the_page_even_with_api_keys() -> None:
    client = _client(api_keys=["k"], langs=["en", "de"])
    assert client.get("/live/languages").status_code == 200
    assert client.get("/v1/models").status_code == 401  # the rest still asks for a key


@pytest.fixture(scope="module")
def page_server() -> Iterator[str]:
    """/live and /live/languages of a ``serve --langs en,de`` server, without a model."""
    import uvicorn

    port = free_port()
    app = create_app(Settings(langs=["en", "de"], api_keys=["page-key"], port=port))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(30)


@pytest.mark.skipif(CHROMIUM is None, reason="Debian package 'chromium' is not installed")
def test_the_page_offers_only_the_served_languages(page_server: str) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=BROWSER_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 400})
        page.goto(page_server + "/live")
        page.wait_for_selector('#targets input[value="de"]', timeout=WAIT_MS)
        sources = page.eval_on_selector_all(
            "#source option", "els => els.map(e => [e.value, e.textContent])")
        targets = page.eval_on_selector_all(
            "#targets label", "els => els.map(e => [e.querySelector('input').value, "
            "e.textContent.trim(), e.querySelector('input').checked])")
        assert sources == [["en", "English"], ["de", "German"]]
        assert page.eval_on_selector("#source", "e => e.value") == "en"
        assert targets == [["en", "English", False], ["de", "German", True]]
        assert "French" not in page.inner_text("header")
        # the grid's columns follow the choice, with the server's names
        assert page.eval_on_selector_all("#captions .head > div",
                                         "els => els.map(e => e.textContent)") == \
            ["Source (en)", "German"]
        assert page.locator("#errors li").count() == 0
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "live-served-languages.png"))
        browser.close()
