"""A session never moves backwards, conflicts are final, a full store is a 429 (issue 12)."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.conftest import LiveServer

URL_BODY = {"model": "default", "target_lang": "de"}


@pytest.fixture(scope="module")
def small_server():
    with LiveServer(max_sessions=3, max_new_tokens=24) as server:
        yield server


def _post(server, text: str, **extra) -> httpx.Response:
    body = {**URL_BODY, "messages": [{"role": "user", "content": text}], **extra}
    return httpx.post(server.url + "/v1/chat/completions", json=body, timeout=120)


def _stale(r: httpx.Response) -> None:
    assert r.status_code == 409, r.text
    assert r.headers["x-should-retry"] == "false"
    assert r.json()["error"]["code"] == "stale_update"


def test_a_retried_shorter_partial_is_refused_and_the_newest_stays(small_server) -> None:
    sid = "order-1"
    first = _post(small_server, "Ladies and", session_id=sid).json()
    second = _post(small_server, "Ladies and gentlemen", session_id=sid).json()
    assert second["livetrans"]["revision"] == 2
    _stale(_post(small_server, "Ladies and", session_id=sid))  # the retry arrives late
    _stale(_post(small_server, "Ladies and gentlemen", session_id=sid))  # a duplicate
    session = small_server.app.state.livetrans.sessions.get(sid)
    assert session.newest_source == "Ladies and gentlemen"
    # the draft is the second update's translation
    assert len(session.plan_draft("de", "en").tokens) == second["usage"]["completion_tokens"]
    third = _post(small_server, "Ladies and gentlemen, welcome", session_id=sid).json()
    # the draft was the second update's translation, not the stale first one's
    assert third["livetrans"]["revision"] == 3
    assert third["livetrans"]["ssbd_draft_tokens"] == second["usage"]["completion_tokens"]
    assert first["choices"][0]["message"]["content"]


def test_seq_orders_updates_and_allows_a_retraction(small_server) -> None:
    sid = "order-seq"
    assert _post(small_server, "The weather is nice", session_id=sid, seq=1).status_code == 200
    # a shorter hypothesis with a newer seq is a retraction: applied
    r = _post(small_server, "The weather is", session_id=sid, seq=2)
    assert r.status_code == 200 and r.json()["livetrans"]["revision"] == 2
    _stale(_post(small_server, "The weather is nice today", session_id=sid, seq=2))
    _stale(_post(small_server, "The weather is nice today.", session_id=sid, seq=1,
                 is_final=True))
    r = _post(small_server, "The weather is nice today.", session_id=sid, seq=3,
              is_final=True)
    assert r.status_code == 200 and r.json()["livetrans"]["is_final"]


def test_a_busy_session_409_is_not_retried_by_the_official_sdk(small_server) -> None:
    sent: list[str] = []
    http = httpx.Client(event_hooks={"request": [lambda req: sent.append(req.url.path)]})
    client = openai.OpenAI(base_url=small_server.url + "/v1", api_key="unused",
                           max_retries=2, http_client=http)
    store = small_server.app.state.livetrans.sessions
    held = store.acquire("sdk-busy")  # another update of this session is in flight
    try:
        with pytest.raises(openai.ConflictError) as info:
            client.chat.completions.create(
                model="default", messages=[{"role": "user", "content": "Hello there"}],
                extra_body={"target_lang": "de", "session_id": "sdk-busy",
                            "is_final": False})
    finally:
        store.release(held)
    assert info.value.response.headers["x-should-retry"] == "false"
    assert info.value.body["code"] == "session_busy"
    assert sent == ["/v1/chat/completions"]  # once: the SDK did not retry


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_store_full_of_busy_sessions_is_a_429_not_a_500(small_server, stream) -> None:
    store = small_server.app.state.livetrans.sessions
    held = [store.acquire(f"hold-{i}") for i in range(store.max_sessions)]
    try:
        r = _post(small_server, "Hello there", session_id="one-more", stream=stream)
        assert r.status_code == 429, r.text
        err = r.json()["error"]
        assert err["code"] == "sessions_full" and err["type"] == "rate_limit_error"
        assert r.headers["retry-after"] == "1"
        # stateless requests need no session slot and still work
        assert _post(small_server, "Hello there", max_tokens=4).status_code == 200
    finally:
        for session in held:
            store.release(session)
    assert _post(small_server, "Hello there", session_id="one-more").status_code == 200
