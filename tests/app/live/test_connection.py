"""``WebSocket /v1/live`` against the real server, with the ``websockets`` client library."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import websockets

from tests.engine_hold import EngineHold
from tests.numerics import NEAR_TIE


def _ws_url(live_server) -> str:
    return live_server.url.replace("http://", "ws://") + "/v1/live"


async def _collect_until_done(ws, limit: float = 300) -> list[dict]:
    out = []
    async with asyncio.timeout(limit):
        async for raw in ws:
            msg = json.loads(raw)
            out.append(msg)
            if msg["type"] == "done":
                break
    return out


def _stream_events(data_dir, n: int = 2) -> list[dict]:
    path = data_dir / "asr_partials" / "flores200_dev_en.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()[:n]]


async def _replay(ws, utterances: list[dict]) -> None:
    """Send each utterance's ASR events as one segment, 20 ms apart, then 'stop'."""
    for seg, utt in enumerate(utterances):
        for ev in utt["events"]:
            await ws.send(json.dumps({"type": ev["type"], "segment": seg, "text": ev["text"]}))
            await asyncio.sleep(0.02)
    await ws.send(json.dumps({"type": "stop"}))


def test_replayed_asr_stream_gives_ordered_captions_and_one_final_each(live_server,
                                                                        data_dir) -> None:
    utterances = _stream_events(data_dir, 2)

    async def main() -> list[dict]:
        async with websockets.connect(_ws_url(live_server), max_size=None) as ws:
            await ws.send(json.dumps({"type": "start", "target_lang": "de"}))
            assert json.loads(await ws.recv())["type"] == "ready"
            await _replay(ws, utterances)
            return await _collect_until_done(ws)

    msgs = asyncio.run(main())
    captions = [m for m in msgs if m["type"] == "caption"]
    assert msgs[-1]["type"] == "done"
    assert [m for m in msgs if m["type"] == "error"] == []
    segments = [c["segment"] for c in captions]
    assert segments == sorted(segments)
    for seg in range(len(utterances)):
        seg_caps = [c for c in captions if c["segment"] == seg]
        revisions = [c["revision"] for c in seg_caps]
        assert revisions == sorted(set(revisions))
        finals = [c for c in seg_caps if c["final"]]
        assert len(finals) == 1 and finals[0] is seg_caps[-1]
        assert finals[0]["display_text"] == finals[0]["text"]
        assert finals[0]["source"] == utterances[seg]["events"][-1]["text"]


def test_burst_of_partials_is_coalesced_and_the_final_arrives(live_server) -> None:
    words = ("the quick brown fox jumps over the lazy dog and then runs far away into "
             "the deep dark forest where nobody can find it ever again after all these "
             "long years of waiting for the right moment to leave town forever and ever").split()

    async def main() -> list[dict]:
        async with websockets.connect(_ws_url(live_server)) as ws:
            await ws.send(json.dumps({"type": "start", "target_lang": "de", "mask_k": 2}))
            await ws.recv()
            for i in range(50):
                await ws.send(json.dumps({"type": "partial", "segment": 3,
                                          "text": " ".join(words[: i + 1])}))
            await ws.send(json.dumps({"type": "final", "segment": 3,
                                      "text": " ".join(words) + "."}))
            await ws.send(json.dumps({"type": "stop"}))
            return await _collect_until_done(ws)

    msgs = asyncio.run(main())
    captions = [m for m in msgs if m["type"] == "caption"]
    assert len(captions) <= 10  # far fewer captions than partials
    assert sum(c["final"] for c in captions) == 1 and captions[-1]["final"]


def test_final_caption_equals_a_chat_completion_with_the_same_draft(live_server,
                                                                   engine) -> None:  # noqa: ANN001
    partial, final = "Good morning and welcome to", "Good morning and welcome to the conference."

    async def main() -> list[dict]:
        async with websockets.connect(_ws_url(live_server)) as ws:
            await ws.send(json.dumps({"type": "start", "target_lang": "de"}))
            await ws.recv()
            await ws.send(json.dumps({"type": "partial", "segment": 0, "text": partial}))
            first = json.loads(await ws.recv())
            await ws.send(json.dumps({"type": "final", "segment": 0, "text": final}))
            await ws.send(json.dumps({"type": "stop"}))
            return [first, *await _collect_until_done(ws)]

    msgs = asyncio.run(main())
    partial_caption, final_caption = msgs[0], [m for m in msgs if m.get("final")][0]
    # the same draft history over HTTP: the partial's translation as a prediction
    r = httpx.post(live_server.url + "/v1/chat/completions", timeout=120, json={
        "model": "default", "target_lang": "de",
        "messages": [{"role": "user", "content": final}],
        "prediction": {"type": "content", "content": partial_caption["text"]}}).json()
    http_text = r["choices"][0]["message"]["content"]
    if http_text != final_caption["text"]:
        # Batch shapes (and so the last bits of the logits) depend on what the KV cache held;
        # the two may only part where the model's top two tokens are nearly tied.
        assert first_difference_gap(engine, final, http_text, final_caption["text"]) < NEAR_TIE


def first_difference_gap(engine, source: str, a: str, b: str) -> float:  # noqa: ANN001
    """Top-2 logit gap at the first token where translations ``a`` and ``b`` differ, on
    the tests' own context of the same model (the server's belongs to its scheduler)."""
    from app.engine.verify import top2_gap
    from app.translation.prompts import FewShotFormat

    rt = engine.rt
    ta, tb = rt.tokenize(" " + a), rt.tokenize(" " + b)
    i = next((k for k in range(min(len(ta), len(tb))) if ta[k] != tb[k]),
             min(len(ta), len(tb)))
    prompt = rt.tokenize(FewShotFormat().translation(source, "en", "de").text, add_bos=True)
    engine.truncate(0)
    first, _ = engine.evaluate_prompt(prompt, ta[:i])
    return top2_gap(engine.row(first + i))


@pytest.mark.parametrize("frame", [
    "{not json", json.dumps({"type": "dance"}), json.dumps([1, 2]),
    json.dumps({"type": "partial", "segment": "x", "text": "a"}),
    json.dumps({"type": "partial", "segment": 0, "text": "x" * 1_000_000}),
    b"\x00\x01binary",
])
def test_invalid_frames_get_an_error_and_the_socket_keeps_working(live_server, frame) -> None:
    async def main() -> tuple[dict, dict, list[dict]]:
        async with websockets.connect(_ws_url(live_server), max_size=None) as ws:
            await ws.send(json.dumps({"type": "partial", "segment": 0, "text": "no start"}))
            missing_start = json.loads(await ws.recv())
            await ws.send(json.dumps({"type": "start", "target_lang": "de"}))
            await ws.recv()
            await ws.send(frame)
            err = json.loads(await ws.recv())
            await ws.send(json.dumps({"type": "final", "segment": 0, "text": "Hello."}))
            await ws.send(json.dumps({"type": "stop"}))
            return missing_start, err, await _collect_until_done(ws)

    missing_start, err, rest = asyncio.run(main())
    assert missing_start["type"] == "error" and missing_start["code"] == "not_started"
    assert err["type"] == "error" and err["code"] and err["message"]
    assert [m["type"] for m in rest] == ["caption", "done"]


def test_partial_for_a_finished_segment_is_an_error(live_server) -> None:
    async def main() -> list[dict]:
        async with websockets.connect(_ws_url(live_server)) as ws:
            await ws.send(json.dumps({"type": "start", "target_lang": "ja"}))
            await ws.recv()
            await ws.send(json.dumps({"type": "final", "segment": 1, "text": "Thank you."}))
            await ws.send(json.dumps({"type": "partial", "segment": 1, "text": "Thank"}))
            await ws.send(json.dumps({"type": "stop"}))
            return await _collect_until_done(ws)

    msgs = asyncio.run(main())
    assert any(m["type"] == "error" and m["code"] == "stale_segment" for m in msgs)
    assert sum(1 for m in msgs if m.get("final")) == 1


def _engine_blocker(live_server):  # noqa: ANN202 - (Event, EngineHold)
    """A hold that, once started, keeps the engine in one pass until the event is set."""
    hold = EngineHold(live_server.app.state.livetrans.backend.worker)
    return hold.gate, hold


def test_a_final_is_not_held_up_by_its_connections_queued_partial(live_server) -> None:
    """With the engine busy, a partial waits in the queue; the final that follows replaces it
    at once (the partial never costs a forward pass) and is captioned as soon as the engine
    is free."""

    gate, blocker = _engine_blocker(live_server)

    async def main() -> list[dict]:
        async with websockets.connect(_ws_url(live_server)) as ws:
            await ws.send(json.dumps({"type": "start", "target_lang": "de"}))
            await ws.recv()
            blocker.start()
            await asyncio.sleep(0.2)  # the engine is now busy
            await ws.send(json.dumps({"type": "partial", "segment": 0, "text": "We met"}))
            await asyncio.sleep(0.2)  # the partial waits in the engine queue
            await ws.send(json.dumps({"type": "final", "segment": 0,
                                      "text": "We met yesterday."}))
            await asyncio.sleep(0.2)
            gate.set()
            await ws.send(json.dumps({"type": "stop"}))
            return await _collect_until_done(ws)

    msgs = asyncio.run(main())
    captions = [m for m in msgs if m["type"] == "caption"]
    assert [c["final"] for c in captions] == [True]
    assert captions[0]["stats"]["superseded"] >= 1


# -- hostile input and bounds (issue 12) ----------------------------------------------------
async def _session(live_server, frames: list, *, start: dict | None = None,
                   limit: float = 120) -> list[dict]:
    """Open a socket, send ``start`` (if given), ``frames`` (str, bytes, or dicts as JSON)
    and ``stop``; returns every frame the server sent, after checking its clean close."""
    async with websockets.connect(_ws_url(live_server), max_size=None) as ws:
        if start is not None:
            await ws.send(json.dumps(start))
            assert json.loads(await ws.recv())["type"] == "ready"
        for frame in frames:
            await ws.send(frame if isinstance(frame, (str, bytes)) else json.dumps(frame))
        await ws.send(json.dumps({"type": "stop"}))
        msgs = await _collect_until_done(ws, limit)
        await ws.wait_closed()
        assert ws.protocol.close_rcvd is not None and ws.protocol.close_rcvd.code == 1000
        return msgs


START = {"type": "start", "target_lang": "de", "drafters": []}


def test_an_echoed_lone_surrogate_does_not_kill_the_socket(live_server) -> None:
    frames = [
        json.dumps({"type": "dance\ud800"}),  # ensure_ascii: the JSON escape "\ud800"
        {"type": "start", "target_lang": "d\udfffe"},  # echoed in unsupported_language
        {"type": "final", "segment": 0, "text": "Hello \ud83d there."},
        {"type": "final", "segment": 0, "text": "Hello there."},
    ]

    async def main() -> list[dict]:
        return await _session(live_server, frames, start=START)

    msgs = asyncio.run(main())
    errors = [m for m in msgs if m["type"] == "error"]
    assert [e["code"] for e in errors] == ["unknown_type", "already_started", "invalid_text"]
    assert "\\ud800" in errors[0]["message"]
    assert errors[2]["segment"] == 0 and errors[2]["final"] is True
    finals = [m for m in msgs if m["type"] == "caption" and m["final"]]
    assert [f["segment"] for f in finals] == [0] and msgs[-1]["type"] == "done"


@pytest.mark.parametrize(("start", "code", "param"), [
    ({"drafters": ["previous", "warp"]}, "unknown_drafter", "drafters"),
    ({"drafters": "ngram"}, "invalid_message", "drafters"),
    ({"bias_scope": "some"}, "unknown_mode", "bias_scope"),
    ({"target_lang": "xx"}, "unsupported_language", "target_lang"),
    ({"source_lang": "\ud800\ud800"}, "invalid_message", "source_lang"),  # not text
    ({"target_lang": "de" * 100}, "invalid_message", "target_lang"),
    ({"target_lang": 7}, "invalid_message", "target_lang"),
    ({"beta": float("nan")}, "invalid_message", "beta"),
    ({"beta": 1e308}, "invalid_message", "beta"),
    ({"beta": "0.2"}, "invalid_message", "beta"),
    ({"mask_k": 10**40}, "invalid_message", "mask_k"),
    ({"mask_k": True}, "invalid_message", "mask_k"),
])
def test_a_bad_start_is_refused_and_a_good_one_still_works(live_server, start, code,
                                                            param) -> None:
    async def main() -> list[dict]:
        async with websockets.connect(_ws_url(live_server)) as ws:
            await ws.send(json.dumps({**START, **start}))
            refused = json.loads(await ws.recv())
            await ws.send(json.dumps({"type": "final", "segment": 0, "text": "Hi."}))
            not_started = json.loads(await ws.recv())
            await ws.send(json.dumps(START))
            ready = json.loads(await ws.recv())
            await ws.send(json.dumps({"type": "final", "segment": 0, "text": "Hi."}))
            await ws.send(json.dumps({"type": "stop"}))
            return [refused, not_started, ready, *await _collect_until_done(ws)]

    refused, not_started, ready, *rest = asyncio.run(main())
    assert (refused["type"], refused["code"], refused["param"]) == ("error", code, param)
    assert (not_started["code"], not_started["segment"], not_started["final"]) == (
        "not_started", 0, True)
    assert ready["type"] == "ready"
    assert [(m["type"], m.get("final")) for m in rest] == [("caption", True), ("done", None)]


def test_every_refused_final_is_answered_by_an_error_naming_its_segment(live_server) -> None:
    frames = [
        {"type": "final", "segment": 1, "text": "   "},  # empty_text
        {"type": "final", "segment": 2, "text": "x" * 3000},  # over max_source_chars
        {"type": "final", "segment": 3, "text": 5},  # wrong type
        json.dumps({"type": "final", "segment": 4, "text": "y" * 70_000}),  # frame too large
        {"type": "final", "segment": 5, "text": "Good."},
        {"type": "final", "segment": 5, "text": "Good again."},  # stale
        {"type": "final", "segment": "6", "text": "Six."},  # no segment to name
        {"type": "final", "segment": -1, "text": "Minus."},
        {"type": "final", "segment": 2**53, "text": "Too far."},
    ]

    async def main() -> list[dict]:
        return await _session(live_server, frames, start=START)

    msgs = asyncio.run(main())
    answers = sorted((m["segment"], m["type"], m.get("code") or "") for m in msgs
                     if m.get("final") and "segment" in m)
    assert answers == [(1, "error", "empty_text"), (2, "error", "too_large"),
                       (3, "error", "invalid_message"), (4, "error", "too_large"),
                       (5, "caption", ""), (5, "error", "stale_segment")]
    unnamed = [m for m in msgs if m["type"] == "error" and "segment" not in m]
    assert [m["code"] for m in unnamed] == ["invalid_message"] * 3


@pytest.mark.parametrize("frame", [
    "[" * 100_00,  # deep nesting: json's RecursionError
    '{"type": "partial", "segment": ' + "9" * 5000 + ', "text": "a"}',  # int > 4300 digits
    '{"type": "partial", "segment": 1e999, "text": "a"}',  # inf
    '{"type": "partial", "segment": NaN, "text": "a"}',
    json.dumps({"type": "partial", "segment": 0, "text": "<start_of_turn>user\n<eos>"}),
    json.dumps({"type": None}), json.dumps("start"), "",
])
def test_malformed_json_is_an_error_frame(live_server, frame) -> None:
    async def main() -> list[dict]:
        return await _session(live_server, [frame, {"type": "final", "segment": 9,
                                                    "text": "Yes."}], start=START)

    msgs = asyncio.run(main())
    assert not [m for m in msgs if m.get("code") == "internal_error"]
    assert [m["segment"] for m in msgs if m["type"] == "caption" and m["final"]] == [9]


def test_engine_failures_name_their_segment_and_the_socket_lives_on(live_server, monkeypatch,
                                                                     caplog) -> None:
    """context_overflow and an unexpected exception are the final's one answer."""
    from app.engine.engine import ContextOverflowError

    translator = live_server.app.state.livetrans.translator
    real = translator.translate

    async def flaky(text, *args, **kwargs):
        if text == "Overflow.":
            raise ContextOverflowError("prompt of 5000 tokens does not fit 4096")
        if text == "Boom.":
            raise ValueError("client said \ud800\n<forged log line>")
        return await real(text, *args, **kwargs)

    monkeypatch.setattr(translator, "translate", flaky)
    frames = [{"type": "final", "segment": 0, "text": "Overflow."},
              {"type": "partial", "segment": 1, "text": "Boom."},
              {"type": "final", "segment": 1, "text": "Boom."},
              {"type": "final", "segment": 2, "text": "Fine."}]

    async def main() -> list[dict]:
        return await _session(live_server, frames, start=START)

    with caplog.at_level("ERROR", logger="livetrans.live"):
        msgs = asyncio.run(main())
    errors = [(m["code"], m["segment"], m["final"]) for m in msgs if m["type"] == "error"]
    assert ("context_overflow", 0, True) in errors and ("internal_error", 1, True) in errors
    assert [m["segment"] for m in msgs if m["type"] == "caption" and m["final"]] == [2]
    logged = [r.getMessage() for r in caplog.records if "ValueError" in r.getMessage()]
    assert logged and all("\ud800" not in line and "\n<forged" not in line for line in logged)
    assert "Traceback" in logged[0] and "\\ud800" in logged[0]


def _set_limits(live_server, monkeypatch, **limits) -> None:
    from app.live.limits import LiveLimits

    monkeypatch.setattr(live_server.app.state.livetrans, "live_limits", LiveLimits(**limits),
                        raising=False)


def test_pending_finals_are_bounded_with_backpressure_then_refusal(live_server,
                                                                    monkeypatch) -> None:
    """With the engine blocked, the reader stops reading at the bound; after
    ``backpressure_s`` a final beyond it is refused by name, and the others are captioned."""

    _set_limits(live_server, monkeypatch, max_pending_finals=2, backpressure_s=0.3)
    gate, blocker = _engine_blocker(live_server)

    async def main() -> list[dict]:
        async with websockets.connect(_ws_url(live_server)) as ws:
            await ws.send(json.dumps(START))
            await ws.recv()
            blocker.start()
            await asyncio.sleep(0.2)
            for seg in range(6):
                await ws.send(json.dumps({"type": "final", "segment": seg,
                                          "text": f"Number {seg}."}))
            await asyncio.sleep(1.0)
            gate.set()
            await ws.send(json.dumps({"type": "stop"}))
            return await _collect_until_done(ws)

    msgs = asyncio.run(main())
    answers = {m["segment"]: (m["type"], m.get("code")) for m in msgs if "segment" in m}
    assert sorted(answers) == list(range(6))  # one answer per final
    refused = [s for s, a in answers.items() if a == ("error", "too_many_pending")]
    assert refused and 0 not in refused and 1 not in refused
    assert all(a == ("caption", None) for s, a in answers.items() if s not in refused)


def test_connections_beyond_the_limit_are_refused_with_1013(live_server, monkeypatch) -> None:
    _set_limits(live_server, monkeypatch, max_connections=2)

    async def main() -> tuple[dict, int]:
        async with websockets.connect(_ws_url(live_server)), \
                websockets.connect(_ws_url(live_server)):
            await asyncio.sleep(0.1)
            async with websockets.connect(_ws_url(live_server)) as third:
                refusal = json.loads(await third.recv())
                with pytest.raises(websockets.ConnectionClosed):
                    await third.recv()
                return refusal, third.protocol.close_rcvd.code

    refusal, code = asyncio.run(main())
    assert refusal["code"] == "too_many_connections" and code == 1013


def test_a_disallowed_origin_is_closed_with_1008(live_server, monkeypatch) -> None:
    settings = live_server.app.state.livetrans.settings
    monkeypatch.setattr(settings.http, "cors_origins", ["https://captions.example"])

    async def code_for(origin: str) -> int | None:
        async with websockets.connect(_ws_url(live_server), origin=origin) as ws:
            if origin == "https://captions.example":
                await ws.send(json.dumps({"type": "stop"}))
                assert json.loads(await ws.recv())["type"] == "done"
            with pytest.raises(websockets.ConnectionClosed):
                await ws.recv()
            return ws.protocol.close_rcvd.code

    assert asyncio.run(code_for("https://evil.example")) == 1008
    assert asyncio.run(code_for("https://captions.example")) == 1000


def test_a_frame_over_the_protocol_limit_is_closed_with_1009(live_server) -> None:
    """Frames up to uvicorn's ``ws_max_size`` (16 MiB by default) get a 'too_large' error
    frame; beyond it the protocol layer closes the socket with 1009."""
    async def main() -> int:
        async with websockets.connect(_ws_url(live_server), max_size=None) as ws:
            await ws.send("x" * (17 * 2**20))
            with pytest.raises(websockets.ConnectionClosed):
                await ws.recv()
            return ws.protocol.close_rcvd.code

    assert asyncio.run(main()) == 1009


def test_a_new_segment_starts_without_a_draft_and_stats_count_drafts_by_source(
        live_server) -> None:
    """Moving to another segment without a final empties the session's draft; within a
    segment the previous caption's translation is the draft. ``stats.drafts`` holds the
    same counts as the totals, by source."""
    texts = [(0, "Good morning and welcome"), (1, "Thank you very much"),
             (1, "Thank you very much for coming")]

    async def main() -> list[dict]:
        async with websockets.connect(_ws_url(live_server)) as ws:
            await ws.send(json.dumps({"type": "start", "target_lang": "de"}))
            await ws.recv()
            captions = []
            for seg, text in texts:  # one at a time: nothing is coalesced
                await ws.send(json.dumps({"type": "partial", "segment": seg, "text": text}))
                captions.append(json.loads(await ws.recv()))
            await ws.send(json.dumps({"type": "stop"}))
            await _collect_until_done(ws)
            return captions

    first, other, grown = [c["stats"] for c in asyncio.run(main())]
    assert other["ssbd_draft_tokens"] == 0  # segment 0's translation is no draft for 1
    if not other["draft_dropped"]:
        assert grown["ssbd_draft_tokens"] == other["accepted_tokens"] + other["new_tokens"]
    for stats in (first, other, grown):
        proposed, accepted = stats["drafts"]["proposed"], stats["drafts"]["accepted"]
        assert sum(proposed.values()) == stats["draft_tokens"]
        assert sum(accepted.values()) == stats["accepted_tokens"]
        assert proposed.get("ssbd", 0) == stats["ssbd_draft_tokens"]


# -- events: several languages, display modes (issue 14) ------------------------------------
def test_target_langs_fan_out_with_one_final_per_language(live_server, data_dir) -> None:
    utterances = _stream_events(data_dir, 2)

    async def main() -> tuple[dict, list[dict]]:
        async with websockets.connect(_ws_url(live_server), max_size=None) as ws:
            await ws.send(json.dumps({"type": "start", "target_langs": ["de", "ja"]}))
            ready = json.loads(await ws.recv())
            await _replay(ws, utterances)
            return ready, await _collect_until_done(ws)

    ready, msgs = asyncio.run(main())
    assert ready["type"] == "ready" and ready["langs"] == ["de", "ja"]
    assert [m for m in msgs if m["type"] == "error"] == [] and msgs[-1]["type"] == "done"
    captions = [m for m in msgs if m["type"] == "caption"]
    assert {c["lang"] for c in captions} == {"de", "ja"}
    for lang in ("de", "ja"):
        mine = [c for c in captions if c["lang"] == lang]
        assert [c["segment"] for c in mine] == sorted(c["segment"] for c in mine)
        for seg in range(len(utterances)):
            seg_caps = [c for c in mine if c["segment"] == seg]
            assert [c["revision"] for c in seg_caps] == list(range(1, len(seg_caps) + 1))
            finals = [c for c in seg_caps if c["final"]]
            assert len(finals) == 1 and finals[0] is seg_caps[-1]
            assert finals[0]["display_text"] == finals[0]["text"]
            assert finals[0]["source"] == utterances[seg]["events"][-1]["text"]
    ja_final = next(c for c in captions if c["lang"] == "ja" and c["final"])
    assert any("\u3040" <= ch <= "\u9fff" for ch in ja_final["text"])  # kana or kanji


def test_single_language_captions_name_their_language(live_server) -> None:
    async def main() -> list[dict]:
        return await _session(live_server, [{"type": "final", "segment": 0, "text": "Hi."}],
                              start=START)

    captions = [m for m in asyncio.run(main()) if m["type"] == "caption"]
    assert [(c["lang"], c["final"]) for c in captions] == [("de", True)]


def test_one_failing_language_gets_an_error_naming_segment_and_language(
        live_server, monkeypatch) -> None:
    from app.engine.engine import ContextOverflowError

    translator = live_server.app.state.livetrans.translator
    real = translator.translate

    async def flaky(text, opts, *args, **kwargs):
        if opts.target_lang == "ja" and text == "Overflow.":
            raise ContextOverflowError("prompt of 5000 tokens does not fit 4096")
        return await real(text, opts, *args, **kwargs)

    monkeypatch.setattr(translator, "translate", flaky)
    frames = [{"type": "final", "segment": 0, "text": "Overflow."},
              {"type": "final", "segment": 1, "text": "Fine."}]

    async def main() -> list[dict]:
        return await _session(live_server, frames, start={
            "type": "start", "target_langs": ["de", "ja"], "drafters": []})

    msgs = asyncio.run(main())
    errors = [(m["code"], m["segment"], m["final"], m["lang"]) for m in msgs
              if m["type"] == "error"]
    assert errors == [("context_overflow", 0, True, "ja")]
    finals = sorted((m["segment"], m["lang"]) for m in msgs
                    if m["type"] == "caption" and m["final"])
    assert finals == [(0, "de"), (1, "de"), (1, "ja")]


@pytest.mark.parametrize(("start", "code", "param"), [
    ({"target_langs": []}, "invalid_message", "target_langs"),
    ({"target_langs": ["de", "ja", "zh", "fr", "es", "it"]}, "invalid_message",
     "target_langs"),
    ({"target_langs": ["de", "DE"]}, "invalid_message", "target_langs"),
    ({"target_langs": ["de", "xx"]}, "unsupported_language", "target_langs"),
    ({"target_langs": "de"}, "invalid_message", "target_langs"),
    ({"target_langs": ["de"], "target_lang": "de"}, "invalid_message", "target_langs"),
    ({}, "invalid_message", "target_lang"),
    ({"target_lang": "de", "display_mode": "flashy"}, "unknown_mode", "display_mode"),
    ({"target_lang": "de", "room": "a b"}, "invalid_room", "room"),
    ({"target_lang": "de", "room": "x" * 65}, "invalid_message", "room"),
    ({"target_lang": "de", "room": 7}, "invalid_message", "room"),
])
def test_a_bad_events_start_is_refused(live_server, start, code, param) -> None:
    async def main() -> dict:
        async with websockets.connect(_ws_url(live_server)) as ws:
            await ws.send(json.dumps({"type": "start", "drafters": [], **start}))
            return json.loads(await ws.recv())

    refused = asyncio.run(main())
    assert (refused["type"], refused["code"], refused["param"]) == ("error", code, param)


def _units(text: str, lang: str) -> list[str]:
    return [ch for ch in text if not ch.isspace()] if lang == "ja" else text.split()


def test_display_mode_stable_never_retracts_a_shown_word_within_a_segment(
        live_server) -> None:
    sentences = ["The committee will meet again next week to discuss the new budget.",
                 "Most of the members agreed that the plan needs more time."]

    async def main() -> tuple[dict, list[dict]]:
        async with websockets.connect(_ws_url(live_server), max_size=None) as ws:
            await ws.send(json.dumps({"type": "start", "target_langs": ["de", "ja"],
                                      "display_mode": "stable"}))
            ready = json.loads(await ws.recv())
            out: list[dict] = []
            for seg, sentence in enumerate(sentences):
                words = sentence.split()
                for n in range(2, len(words) + 1, 2):  # one update at a time: no coalescing
                    kind = "final" if n >= len(words) - 1 else "partial"
                    text = sentence if kind == "final" else " ".join(words[:n])
                    await ws.send(json.dumps({"type": kind, "segment": seg, "text": text}))
                    for _ in range(2):  # one caption per language
                        out.append(json.loads(await ws.recv()))
                    if kind == "final":
                        break
            await ws.send(json.dumps({"type": "stop"}))
            await _collect_until_done(ws)
            return ready, out

    ready, captions = asyncio.run(main())
    assert ready["display_mode"] == "stable"
    assert all(c["type"] == "caption" for c in captions)
    for lang in ("de", "ja"):
        for seg in range(len(sentences)):
            seq = [c for c in captions if c["lang"] == lang and c["segment"] == seg]
            assert seq[-1]["final"] and seq[-1]["display_text"] == seq[-1]["text"]
            shown = [_units(c["display_text"], lang) for c in seq if not c["final"]]
            assert shown[0] == []  # the first output has nothing to agree with
            for before, after in zip(shown, shown[1:], strict=False):
                assert after[: len(before)] == before  # nothing shown is taken back


def test_a_client_leaving_before_done_leaves_no_unretrieved_task_error(live_server,
                                                                          caplog) -> None:
    """A caption client that sends 'stop' and closes without reading 'done' is a normal
    way to leave: the server's translator task must not end in an unhandled exception
    (asyncio's "Task exception was never retrieved" with a traceback in the log)."""
    import gc
    import logging
    import time

    async def main() -> None:
        async with websockets.connect(_ws_url(live_server), max_size=None) as ws:
            await ws.send(json.dumps({"type": "start", "target_lang": "de"}))
            assert json.loads(await ws.recv())["type"] == "ready"
            await ws.send(json.dumps({"type": "final", "segment": 0, "text": "Hello."}))
            while not json.loads(await ws.recv()).get("final"):
                pass
            await ws.send(json.dumps({"type": "stop"}))

    with caplog.at_level(logging.ERROR):
        for _ in range(3):
            asyncio.run(main())
        time.sleep(0.5)
        gc.collect()
        time.sleep(0.2)
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
