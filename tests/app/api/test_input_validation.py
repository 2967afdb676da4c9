"""Issue 12 reproductions: input the server cannot use is a 4xx at the edge, never a 500.

Bodies are sent as raw JSON with ``\\ud800``-style escapes (what a buggy client or a
truncated UTF-16 string produces); Python decodes them into strings that cannot be encoded.
"""

from __future__ import annotations

import json

import httpx
import pytest

MSG = [{"role": "user", "content": "Good morning."}]
BASE = {"model": "default", "target_lang": "de", "max_tokens": 8, "messages": MSG}


def _post(server, body: dict, **headers: str) -> httpx.Response:
    raw = json.dumps(body)  # ensure_ascii: a lone surrogate travels as "\ud800"
    return httpx.post(server.url + "/v1/chat/completions", content=raw, timeout=120,
                      headers={"content-type": "application/json", **headers})


def _error(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    return err


SURROGATES = {
    "content": {"messages": [{"role": "user", "content": "Hi \ud800 there"}]},
    "content part": {"messages": [{"role": "user",
                                   "content": [{"type": "text", "text": "\udfff"}]}]},
    "name": {"messages": [{"role": "user", "content": "Hi", "name": "a\ud800"}]},
    "prediction": {"prediction": {"type": "content", "content": "Guten \ud800"}},
    "prediction part": {"prediction": {"type": "content",
                                       "content": [{"type": "text", "text": "\ud800"}]}},
    "model": {"model": "default\ud800"},
    "stop": {"stop": "\ud800"},
    "stop list": {"stop": ["ok", "\udc00"]},
    "session_id": {"session_id": "talk-\ud800"},
    "target_lang": {"target_lang": "d\ud800"},
    "source_lang": {"source_lang": "e\ud800"},
    "user": {"user": "\ud800"},
    "plain chat": {"target_lang": None,
                   "messages": [{"role": "user", "content": "\ud800"}]},
}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("case", sorted(SURROGATES))
def test_lone_surrogates_are_a_400_naming_the_field(live_server, case: str,
                                                     stream: bool) -> None:
    body = {**BASE, **SURROGATES[case], "stream": stream}
    err = _error(_post(live_server, body), 400)
    assert err["code"] == "invalid_unicode" and "surrogate" in err["message"]
    assert err["param"] and ".str" not in err["param"] and "[" not in err["param"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_negative_seed_with_sampling_is_a_422(live_server, stream: bool) -> None:
    body = {**BASE, "seed": -1, "temperature": 0.8, "stream": stream}
    err = _error(_post(live_server, body), 422)
    assert err["param"] == "seed"
    # the largest seed accepted still works (numpy takes any non-negative int)
    ok = _post(live_server, {**BASE, "seed": 2**63 - 1, "temperature": 0.8})
    assert ok.status_code == 200, ok.text


@pytest.mark.parametrize("field, value, status", [
    ("seed", 2**63, 422),
    ("seq", -1, 422),
    ("beta", 1.0, 422),
    ("beta", float("nan"), 422),
    ("temperature", float("inf"), 422),
    ("mask_k", 10**30, 422),
    ("max_tokens", 0, 422),
    ("drafters", ["previous", "magic"], 422),
    ("drafters", ["ngram"] * 5, 422),
    ("stop", ["x" * 257], 422),
    ("mask_mode", "everything", 422),
    ("model", "no-such-model", 404),
    ("target_lang", "xx", 422),
])
def test_out_of_range_numbers_and_unknown_names_are_4xx(live_server, field, value,
                                                        status) -> None:
    _error(_post(live_server, {**BASE, field: value}), status)


def test_valid_text_with_astral_characters_is_fine(live_server) -> None:
    body = {**BASE, "messages": [{"role": "user", "content": "Good morning \U0001f600."}]}
    r = _post(live_server, body)
    assert r.status_code == 200, r.text
