"""Every translation option reaches the engine through each path that carries it: the HTTP
request, the WebSocket ``start`` and the eval harness (in process and over HTTP), with the
one set of defaults (``app.translation.translator.DEFAULT_OPTIONS``) everywhere else."""

from __future__ import annotations

import asyncio
import json
from dataclasses import fields, replace

import httpx
import pytest
import websockets

from app.api.schemas import ChatCompletionRequest
from app.live.messages import StartMessage
from app.translation.translator import DEFAULT_OPTIONS, TranslateOptions
from app.usage import UsageError
from eval.methods import NotOverHttp, http_fields, options_for, parse_method

OPTION_NAMES = {f.name for f in fields(TranslateOptions)}

# request field -> (value, the TranslateOptions field it sets, the value that must arrive)
HTTP_OPTIONS = {
    "source_lang": ("en", "source_lang", "en"),
    "target_lang": ("ja", "target_lang", "ja"),
    "beta": (0.35, "beta", 0.35),
    "mask_k": (5, "mask_k", 5),
    "mask_mode": ("draft", "mask_mode", "draft"),
    "bias_scope": ("agreed", "bias_scope", "agreed"),
    "final_beta": (0.1, "final_beta", 0.1),
    "draft_guard": (True, "draft_guard", True),
    "final_retry": (False, "final_retry", False),
    "drafters": (["previous", "ngram"], "drafters", ["previous", "ngram"]),
    "temperature": (0.5, "temperature", 0.5),
    "seed": (7, "seed", 7),
    "stop": (["###"], "stop", ("###",)),
    "max_tokens": (17, "max_tokens", 17),
    "context": (3, "context", 3),
    "glossary": ({"morning": "Morgen"}, "glossary", {"morning": "Morgen"}),
}
START_OPTIONS = {
    "source_lang": ("en", "source_lang", "en"),
    "target_langs": (["ja"], "target_lang", "ja"),
    "beta": (0.35, "beta", 0.35),
    "mask_k": (5, "mask_k", 5),
    "bias_scope": ("agreed", "bias_scope", "agreed"),
    "final_beta": (0.1, "final_beta", 0.1),
    "draft_guard": (True, "draft_guard", True),
    "final_retry": (False, "final_retry", False),
    "drafters": (["previous", "ngram"], "drafters", ["previous", "ngram"]),
    "context": (3, "context", 3),
    "glossary": ({"morning": "Morgen"}, "glossary", {"morning": "Morgen"}),
}
SERVER_SET = {"max_tokens"}  # the WebSocket's updates are bounded by --max-new-tokens


def _differs_from_default(table: dict) -> None:
    for _, (_, name, arrives) in table.items():
        if name not in ("source_lang",):
            assert getattr(DEFAULT_OPTIONS, name) != arrives, f"{name}: pick a non-default"


@pytest.fixture()
def seen_options(live_server):
    """The options of every translation the running server starts, as the engine gets them."""
    translator = live_server.state.translator
    original = translator.translate
    seen: list[TranslateOptions] = []

    async def spy(source, opts, **kw):  # noqa: ANN001, ANN202
        seen.append(opts)
        return await original(source, opts, **kw)

    translator.translate = spy
    yield seen
    translator.translate = original


def _check_arrived(opts: TranslateOptions, table: dict, ignore: set[str] = frozenset()) -> None:
    carried = {name for _, name, _ in table.values()}
    for field, (_, name, arrives) in table.items():
        assert getattr(opts, name) == arrives, field
    for name in OPTION_NAMES - carried - ignore:  # what the path cannot set: the default
        assert getattr(opts, name) == getattr(DEFAULT_OPTIONS, name), name


def test_every_http_option_reaches_the_engine(live_server, seen_options) -> None:
    _differs_from_default(HTTP_OPTIONS)
    body = {"model": "livetrans", "messages": [{"role": "user", "content": "Good morning."}],
            **{k: v for k, (v, _, _) in HTTP_OPTIONS.items()}}
    resp = httpx.post(f"{live_server.url}/v1/chat/completions", json=body, timeout=300)
    assert resp.status_code == 200, resp.text
    assert len(seen_options) == 1
    _check_arrived(seen_options[0], HTTP_OPTIONS)


def test_every_websocket_option_reaches_the_engine(live_server, seen_options) -> None:
    _differs_from_default(START_OPTIONS)
    start = {"type": "start", **{k: v for k, (v, _, _) in START_OPTIONS.items()}}

    async def talk() -> list[dict]:
        url = live_server.url.replace("http://", "ws://") + "/v1/live"
        async with websockets.connect(url) as ws:
            await ws.send(json.dumps(start))
            await ws.send(json.dumps({"type": "final", "segment": 0, "text": "Good morning."}))
            await ws.send(json.dumps({"type": "stop"}))
            frames = []
            while not frames or frames[-1]["type"] != "done":
                frames.append(json.loads(await asyncio.wait_for(ws.recv(), 300)))
            return frames

    frames = asyncio.run(talk())
    assert not [f for f in frames if f["type"] == "error"], frames
    assert seen_options
    max_new_tokens = live_server.settings.limits.max_new_tokens
    for opts in seen_options:
        _check_arrived(opts, START_OPTIONS, ignore=SERVER_SET)
        assert opts.max_tokens == max_new_tokens


def test_requests_that_set_nothing_get_the_one_set_of_defaults() -> None:
    http = ChatCompletionRequest.model_validate(
        {"model": "m", "messages": [{"role": "user", "content": "x"}]})
    ws = StartMessage.model_validate({"type": "start", "target_lang": "de"})
    for opts in (http.translate_options("en", "de", DEFAULT_OPTIONS.max_tokens),
                 ws.translate_options("en", "de", DEFAULT_OPTIONS.max_tokens)):
        assert opts == replace(DEFAULT_OPTIONS, source_lang="en", target_lang="de")
    # in process, display mask-k is scored afterwards for every --mask-k (the engine runs
    # with mask_k 0 then); every other option is the default
    in_process = options_for(parse_method("ssbd-b0.2"), "en", "de", DEFAULT_OPTIONS.max_tokens)
    assert replace(in_process, mask_k=DEFAULT_OPTIONS.mask_k) == DEFAULT_OPTIONS


METHODS = ["ar", "ssbd-b0", "ssbd-b0.2", "ssbd-b0.3+agreed", "ssbd-b0.2+drafters",
           "ssbd-b0.2+draftmask3", "ssbd-b0.2+biasedfinal", "ssbd-b0.2+finalb0.1",
           "ssbd-b0.2+guard", "ssbd-b0.2+noretry", "ar+retry", "ssbd-b0.2+agreed+noguard"]


@pytest.mark.parametrize("name", METHODS)
def test_eval_over_http_asks_the_server_for_the_in_process_options(name) -> None:
    """``eval --server`` measures what the in-process harness measures: the fields it sends,
    read by the server's own mapping, give the in-process options."""
    method = parse_method(name)
    expected = options_for(method, "en", "de", 64)
    sent = http_fields(method, "en", "de", 64, display_mask_k=3, drafters=["ngram"])
    request = ChatCompletionRequest.model_validate(
        {"model": "m", "messages": [{"role": "user", "content": "x"}], **sent})
    got = request.translate_options("en", "de", 64)
    ignore = {"drafters"}  # in process the chain is built by the harness, not named
    if expected.mask_mode == "display":
        ignore.add("mask_k")  # only the display (scored afterwards) reads it
    for name_ in OPTION_NAMES - ignore:
        assert getattr(got, name_) == getattr(expected, name_), name_


@pytest.mark.parametrize("name", ["ssbd-b0.2+stopdraft", "ssbd-b0.2+biastail"])
def test_eval_over_http_refuses_what_the_api_cannot_carry(name) -> None:
    from argparse import Namespace

    from eval.harness import ServerRunner

    with pytest.raises(NotOverHttp, match=name.split("+")[1]):
        http_fields(parse_method(name), "en", "de", 64, 3, None)
    runner = ServerRunner(Namespace(server="http://127.0.0.1:9", source_lang="en",
                                    drafters="", mask_k="3", api_key=None, max_tokens=64))
    with pytest.raises(UsageError, match="run it in process"):
        runner.check([parse_method("ar"), parse_method(name)])


def test_eval_carries_context_and_glossary_in_process_and_over_http() -> None:
    from eval.methods import TalkSettings

    talk = TalkSettings(context=3, glossary={"model": "Modell"})
    for name, context, glossary in (("ssbd-b0.2", 3, {"model": "Modell"}),
                                    ("ssbd-b0.2+ctx1+nogloss", 1, None)):
        method = parse_method(name)
        expected = options_for(method, "en", "de", 64, talk=talk)
        assert (expected.context, expected.glossary) == (context, glossary)
        sent = http_fields(method, "en", "de", 64, 3, None, talk)
        got = ChatCompletionRequest.model_validate(
            {"model": "m", "messages": [{"role": "user", "content": "x"}], **sent}
        ).translate_options("en", "de", 64)
        assert (got.context, got.glossary) == (context, glossary)
