"""``WebSocket /v1/live`` against the real server, with the ``websockets`` client library."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import websockets


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


def _stream_events(shared_data, n: int = 2) -> list[dict]:
    path = shared_data / "asr_partials" / "flores200_dev_en.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()[:n]]


def test_replayed_asr_stream_gives_ordered_captions_and_one_final_each(live_server,
                                                                        shared_data) -> None:
    utterances = _stream_events(shared_data, 2)

    async def main() -> list[dict]:
        async with websockets.connect(_ws_url(live_server), max_size=None) as ws:
            await ws.send(json.dumps({"type": "start", "target_lang": "de"}))
            assert json.loads(await ws.recv())["type"] == "ready"
            for seg, utt in enumerate(utterances):
                for ev in utt["events"]:
                    await ws.send(json.dumps({"type": ev["type"], "segment": seg,
                                              "text": ev["text"]}))
                    await asyncio.sleep(0.02)
            await ws.send(json.dumps({"type": "stop"}))
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


def test_final_caption_equals_a_chat_completion_with_the_same_draft(live_server) -> None:
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
        assert first_difference_gap(live_server, final, http_text, final_caption["text"]) < 1.0


def first_difference_gap(live_server, source: str, a: str, b: str) -> float:
    """Top-2 logit gap at the first token where translations ``a`` and ``b`` differ."""
    from app.engine.verify import top2_gap
    from app.prompts import FewShotFormat

    worker = live_server.app.state.livetrans.worker

    def job(engine) -> float:
        rt = engine.rt
        ta, tb = rt.tokenize(" " + a), rt.tokenize(" " + b)
        i = next((k for k in range(min(len(ta), len(tb))) if ta[k] != tb[k]),
                 min(len(ta), len(tb)))
        prompt = rt.tokenize(FewShotFormat().translation(source, "en", "de").text,
                             add_bos=True)
        engine.truncate(0)
        first, _ = engine.evaluate_prompt(prompt, ta[:i])
        return top2_gap(engine.row(first + i))

    return asyncio.run(worker.submit(job))


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


def test_a_final_is_not_held_up_by_its_connections_queued_partial(live_server) -> None:
    """With the engine busy, a partial waits in the queue; the final that follows replaces it
    at once (the partial never costs a forward pass) and is captioned as soon as the engine
    is free."""
    import threading

    worker = live_server.app.state.livetrans.worker
    gate = threading.Event()
    blocker = threading.Thread(target=lambda: asyncio.run(worker.submit(
        lambda _engine: gate.wait(30))), daemon=True)

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
