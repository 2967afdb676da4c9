"""The real server on loopback, driven by the official ``openai`` SDK."""

from __future__ import annotations

import httpx
import openai
import pytest

from app.engine.verify import top2_gap
from app.translation.prompts import FewShotFormat
from tests.numerics import NEAR_TIE, first_difference

SOURCE = "The library opens at nine o'clock every morning."


def _translate(client, text: str = SOURCE, **extra):
    body = {"target_lang": "de", **extra}
    return client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": text}], extra_body=body)


def test_models_lists_the_loaded_model(openai_client) -> None:
    ids = [m.id for m in openai_client.models.list()]
    assert ids == ["gemma-3-270m-q4_k_m"]


def test_non_streamed_translation(openai_client, live_server) -> None:
    r = _translate(openai_client)
    text = r.choices[0].message.content
    assert text and r.choices[0].finish_reason == "stop"
    info = r.model_extra["livetrans"]
    assert info["display_text"] == text  # stateless calls are final: nothing masked
    assert r.usage.completion_tokens == info["new_tokens"] + info["accepted_tokens"]
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    # usage counts the tokens produced: the text re-tokenizes to that many tokens
    rt = live_server.app.state.livetrans.backend.worker.engine.rt
    assert len(rt.tokenize(" " + text)) == r.usage.completion_tokens


def test_streamed_translation_matches_and_ends_with_done(openai_client, live_server) -> None:
    full = _translate(openai_client).choices[0].message.content
    stream = openai_client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": SOURCE}], stream=True,
        stream_options={"include_usage": True}, extra_body={"target_lang": "de"})
    pieces, finish, usage, info = [], None, None, None
    for chunk in stream:
        if chunk.choices:
            pieces.append(chunk.choices[0].delta.content or "")
            finish = chunk.choices[0].finish_reason or finish
            info = (chunk.model_extra or {}).get("livetrans") or info
        if chunk.usage:
            usage = chunk.usage
    assert "".join(pieces) == full and finish == "stop"
    assert usage is not None and usage.completion_tokens == info["new_tokens"] + info[
        "accepted_tokens"]
    # raw SSE: the last event is [DONE]
    with httpx.stream("POST", live_server.url + "/v1/chat/completions", json={
        "model": "default", "stream": True, "target_lang": "de",
        "messages": [{"role": "user", "content": SOURCE}]}, timeout=120) as resp:
        events = [line for line in resp.iter_lines() if line.startswith("data:")]
    assert events[-1].strip() == "data: [DONE]"


def test_session_updates_reuse_the_previous_translation(openai_client) -> None:
    sid = "test-session-reuse"
    first = _translate(openai_client, "The library opens at nine", session_id=sid)
    info1 = first.model_extra["livetrans"]
    assert info1["revision"] == 1 and info1["draft_tokens"] == 0
    second = _translate(openai_client, SOURCE, session_id=sid)
    info2 = second.model_extra["livetrans"]
    assert info2["revision"] == 2 and info2["draft_tokens"] > 0
    assert second.usage.completion_tokens_details.accepted_prediction_tokens == info2[
        "accepted_tokens"]
    # the counts by source are the same numbers: one DraftStats behind every field
    drafts = info2["drafts"]
    assert sum(drafts["proposed"].values()) == info2["draft_tokens"]
    assert sum(drafts["accepted"].values()) == info2["accepted_tokens"]
    assert drafts["proposed"]["ssbd"] == info2["ssbd_draft_tokens"] > 0
    assert info1["drafts"]["proposed"].get("ssbd", 0) == 0
    final = _translate(openai_client, SOURCE, session_id=sid, is_final=True)
    assert final.model_extra["livetrans"]["display_text"] == final.choices[0].message.content


def test_prediction_is_used_as_a_draft(openai_client, engine) -> None:
    own = _translate(openai_client).choices[0].message.content
    r = openai_client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": SOURCE}],
        prediction={"type": "content", "content": own}, extra_body={"target_lang": "de"})
    details = r.usage.completion_tokens_details
    assert details.accepted_prediction_tokens > 0
    got = r.choices[0].message.content
    if got != own:
        # Both are greedy (a prediction is verified with beta 0), but the prediction is
        # verified in one pass and the first answer was decoded token by token: the shapes
        # may part them at a near-tie only (tests/numerics.py), never elsewhere.
        rt = engine.rt
        prompt = rt.tokenize(FewShotFormat().translation(SOURCE, "en", "de").text,
                             add_bos=True)
        a, b = rt.tokenize(" " + own), rt.tokenize(" " + got)
        k = first_difference(a, b)
        first, _ = engine.evaluate_prompt(prompt + a[:k])
        assert top2_gap(engine.row(first)) < NEAR_TIE, (own, got)


def test_plain_chat_without_target_lang(openai_client) -> None:
    r = openai_client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": "Say hello."}], max_tokens=8)
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.completion_tokens <= 8


GOOD = {"model": "default", "messages": [{"role": "user", "content": SOURCE}],
        "target_lang": "de"}


@pytest.mark.parametrize(
    ("change", "exc", "status"),
    [
        ({"messages": None}, openai.BadRequestError, 400),  # missing messages
        ({"messages": "not a list"}, openai.UnprocessableEntityError, 422),  # wrong type
        ({"beta": "high"}, openai.UnprocessableEntityError, 422),
        ({"beta": 1.5}, openai.UnprocessableEntityError, 422),
        ({"target_lang": "xx"}, openai.UnprocessableEntityError, 422),
        ({"messages": [{"role": "user", "content": "   "}]}, openai.UnprocessableEntityError,
         422),
        ({"messages": [{"role": "user", "content": "word " * 1000}]}, openai.APIStatusError,
         413),
        ({"model": "no-such-model"}, openai.NotFoundError, 404),
    ],
)
def test_bad_requests_raise_the_matching_sdk_errors(openai_client, change, exc, status) -> None:
    """Sent through the SDK's own transport, so the SDK picks the exception class."""
    body = {**GOOD, **change}
    body = {k: v for k, v in body.items() if v is not None}
    with pytest.raises(exc) as info:
        openai_client.post("/chat/completions", body=body, cast_to=object)
    assert info.value.status_code == status
    assert isinstance(info.value.body, dict) and info.value.body.get("message")


def test_error_shapes_over_raw_http(live_server) -> None:
    r = httpx.post(live_server.url + "/v1/chat/completions", content=b"{not json",
                   headers={"content-type": "application/json"})
    assert r.status_code == 400 and set(r.json()["error"]) == {"message", "type", "param", "code"}
    r = httpx.get(live_server.url + "/v1/nothing-here")
    assert r.status_code == 404 and "error" in r.json()
    r = httpx.post(live_server.url + "/v1/chat/completions", json={
        "model": "default", "messages": "not a list"})
    assert r.status_code == 422 and r.json()["error"]["param"] == "messages"


def test_health_and_metrics(live_server) -> None:
    r = httpx.get(live_server.url + "/health")
    assert r.status_code == 200 and r.json()["status"] == "ok"
    m = httpx.get(live_server.url + "/metrics").text
    assert "livetrans_requests_total" in m and "livetrans_forward_passes_total" in m


def test_stop_sequences_and_token_limits(openai_client) -> None:
    text = "First we eat, then we sleep, and then we work again."
    r = _translate(openai_client, text, stop=[","])
    assert "," not in r.choices[0].message.content
    r = openai_client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": text}],
        max_completion_tokens=2, extra_body={"target_lang": "de"})
    assert r.usage.completion_tokens == 2 and r.choices[0].finish_reason == "length"


def test_sampling_with_temperature_and_seed(openai_client) -> None:
    r = openai_client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": SOURCE}], temperature=0.9,
        seed=7, extra_body={"target_lang": "de"})
    assert r.choices[0].message.content
