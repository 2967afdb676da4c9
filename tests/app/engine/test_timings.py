"""Where an update's time goes (``app.engine.timings``): the accumulator's arithmetic, and
the parts a real server reports for real updates (HTTP and WebSocket)."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import websockets

from app.engine.timings import COUNTS, NESTED, PARTS, StepTimings, UpdateTimings, timed

SOURCE = "The committee will publish its final report on renewable energy next spring."


def test_a_generation_folds_in_as_admission_wait_steps_wait_and_hop() -> None:
    t = UpdateTimings(received=100.0)
    steps = StepTimings(submitted=100.0, first_step=100.010, done=100.110,
                        forward_prefill_ms=30.0, forward_decode_ms=40.0,
                        python_step_ms=20.0, detokenize_ms=1.0, prefill_rows=12,
                        verify_rows=5, decode_rows=9, decode_steps=4)
    t.add_generation(steps, resumed=100.112)
    v = t.values
    assert round(v["admit_wait_ms"], 6) == 10.0
    assert round(v["step_wait_ms"], 6) == 10.0  # 100 ms alive, 90 of them its own work
    assert round(v["hop_ms"], 6) == 2.0
    assert (v["prefill_rows"], v["verify_rows"], v["decode_steps"], v["generations"]) == \
        (12, 5, 4, 1)
    # nested parts (detokenizing inside the step's Python) are not counted twice
    assert round(t.total_ms(), 6) == 10 + 30 + 40 + 20 + 10 + 2
    assert round(t.generating_ms, 6) == 112.0


def test_a_job_is_tokenizing_waiting_for_generations_or_its_verdict() -> None:
    t = UpdateTimings()
    with t.job():
        t.add("tokenize_ms", 0.0)
        time.sleep(0.02)
        t.generating_ms += 5.0  # a generation that took 5 of the 20 ms
    # the rest: at least the 15 ms the job slept outside its generation (no upper bound:
    # a busy machine may wake the sleeper late)
    assert t.values["verdict_ms"] >= 14.9


def test_timed_is_free_when_nobody_measures() -> None:
    with timed("tokenize_ms"):
        pass  # no current update: nothing to add to, nothing raised


def test_the_report_names_every_part_and_count() -> None:
    report = UpdateTimings().report()
    assert set(report) == set(PARTS) | set(COUNTS) | {"server_ms"}
    assert NESTED <= set(PARTS)


def _check_parts(timings: dict, wall_ms: float, draft: bool) -> None:
    assert set(timings) == set(PARTS) | set(COUNTS) | {"server_ms"}
    assert all(v >= 0 for v in timings.values())
    parts = sum(v for k, v in timings.items() if k in PARTS and k not in NESTED)
    assert abs(parts - timings["server_ms"]) < 0.1  # rounding of the parts only
    assert timings["server_ms"] <= wall_ms  # inside the server, within the client's wait
    assert timings["generations"] >= 1 and timings["prefill_rows"] >= 1
    assert timings["forward_prefill_ms"] > 0
    assert timings["detokenize_ms"] <= timings["python_step_ms"]
    if draft:
        assert timings["verify_rows"] >= 1
    if timings["decode_steps"]:
        assert timings["decode_rows"] >= timings["decode_steps"]
        assert timings["forward_decode_ms"] > 0


def test_each_http_update_says_where_its_time_went(live_server) -> None:
    words = SOURCE.split()
    session = f"timings-{time.monotonic_ns()}"
    with httpx.Client(base_url=live_server.url, timeout=120) as client:
        for n, final in ((6, False), (len(words), True)):
            t0 = time.perf_counter()
            r = client.post("/v1/chat/completions", json={
                "model": "default", "target_lang": "de", "session_id": session,
                "is_final": final, "messages": [{"role": "user",
                                                 "content": " ".join(words[:n])}]})
            wall = (time.perf_counter() - t0) * 1000
            assert r.status_code == 200, r.text
            info = r.json()["livetrans"]
            # the second update verifies the first's translation as its draft
            _check_parts(info["timings"], wall, draft=final)
            assert info["timings"]["verify_rows"] == info["ssbd_draft_tokens"]


def test_a_streamed_answer_reports_its_timings_too(live_server) -> None:
    body = {"model": "default", "target_lang": "de", "stream": True,
            "messages": [{"role": "user", "content": SOURCE}]}
    with httpx.Client(base_url=live_server.url, timeout=120) as client:
        t0 = time.perf_counter()
        with client.stream("POST", "/v1/chat/completions", json=body) as r:
            chunks = [json.loads(line[6:]) for line in r.iter_lines()
                      if line.startswith("data: {")]
        wall = (time.perf_counter() - t0) * 1000
    last = next(c for c in reversed(chunks) if c.get("livetrans"))
    _check_parts(last["livetrans"]["timings"], wall, draft=False)


def test_each_caption_says_where_its_time_went(live_server) -> None:
    async def talk() -> list[dict]:
        url = live_server.url.replace("http", "ws") + "/v1/live"
        async with websockets.connect(url) as ws:
            await ws.send(json.dumps({"type": "start", "target_lang": "de"}))
            captions = []
            for text, final in (("The committee will publish", False), (SOURCE, True)):
                await ws.send(json.dumps({"type": "final" if final else "partial",
                                          "segment": 0, "text": text}))
                while True:
                    msg = json.loads(await asyncio.wait_for(ws.recv(), 120))
                    if msg["type"] == "caption":
                        captions.append(msg)
                        break
            return captions

    captions = asyncio.run(talk())
    for caption in captions:
        timings = caption["stats"]["timings"]
        _check_parts(timings, 1e9, draft=False)
    assert captions[-1]["stats"]["timings"]["verify_rows"] == \
        captions[-1]["stats"]["ssbd_draft_tokens"]
