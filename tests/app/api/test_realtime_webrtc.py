"""``POST /v1/realtime/translations/calls``: the realtime translation session over WebRTC,
as OpenAI's guide has browsers use it. A client secret minted with the official SDK; an
SDP offer with the microphone and an ``oai-events`` data channel; the events on the data
channel and the translated speech as the remote audio track. Two real peers: aiortc (as a
native or server-side app would be) and headless Chromium running the guide's browser
code with a fake microphone playing espeak-ng speech. Then the requests a call refuses,
each with one clear 4xx in OpenAI's shape."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import numpy as np
import pytest
from openai import OpenAI

from app.live.realtime.client_secrets import ClientSecrets
from tests.browser import CHROMIUM, chromium_args
from tests.conftest import LiveServer
from tests.speech import ESPEAK, SENTENCES, needs_espeak, talk_wav, wer

aiortc = pytest.importorskip("aiortc", reason="aiortc (livetrans[speech]) is not installed")
LIMIT_S = 300  # a bound against hanging, never a latency
CALLS = "/v1/realtime/translations/calls"
GERMAN = {"der", "die", "das", "und", "sie", "wir", "ihr", "ihre", "ihren", "für", "zu",
          "zum", "im", "den", "dem", "ist", "wird", "alle", "euch", "dank", "vielen",
          "danke", "heute", "nächsten", "bericht", "ein", "eine", "mit", "von", "ich"}


@pytest.fixture(scope="module")
def keyed_server():
    with LiveServer(api_keys=["key-1"], max_source_chars=2000) as server:
        yield server


def _secret(server: LiveServer, language: str = "de", source: str = "en") -> str:
    owner = OpenAI(base_url=server.url + "/v1", api_key="key-1", max_retries=0)
    secret = owner.realtime.translations.client_secrets.create(
        session={"model": "livetrans", "audio": {"output": {"language": language}},
                 "livetrans": {"source_language": source}})  # type: ignore[typeddict-unknown-key]
    return secret.value


def _text(events: list[dict], kind: str) -> str:
    return "".join(e["delta"] for e in events if e["type"] == kind)


def _german(text: str) -> bool:
    return bool(GERMAN & {w.strip(".,!?").lower() for w in text.split()})


async def _record(track: Any, voiced: list[float]) -> None:
    """The remote track's 20 ms frames as RMS values, until it ends."""
    from aiortc.mediastreams import MediaStreamError

    while True:
        try:
            frame = await track.recv()
        except MediaStreamError:
            return
        samples = frame.to_ndarray().astype(np.float64)
        voiced.append(float(np.sqrt((samples ** 2).mean())))


@needs_espeak
def test_an_aiortc_peer_speaks_and_gets_events_on_the_data_channel_and_speech_on_a_track(
        keyed_server, tmp_path) -> None:
    from aiortc import RTCPeerConnection, RTCSessionDescription
    from aiortc.contrib.media import MediaPlayer

    secret = _secret(keyed_server)
    wav = talk_wav(tmp_path, SENTENCES, lead_s=0.5)

    async def main() -> tuple[list[dict], list[float], httpx.Response]:
        events: list[dict] = []
        levels: list[float] = []
        closed, created = asyncio.Event(), asyncio.Event()
        pc = RTCPeerConnection()
        player = MediaPlayer(str(wav))
        ended = asyncio.Event()
        player.audio.on("ended", ended.set)
        pc.addTrack(player.audio)
        channel = pc.createDataChannel("oai-events")
        recorders: list[asyncio.Task] = []

        @channel.on("message")
        def on_message(message: str) -> None:
            events.append(json.loads(message))
            if events[-1]["type"] == "session.created":
                created.set()
            if events[-1]["type"] == "session.closed":
                closed.set()

        @pc.on("track")
        def on_track(track: Any) -> None:
            recorders.append(asyncio.ensure_future(_record(track, levels)))

        await pc.setLocalDescription(await pc.createOffer())
        async with httpx.AsyncClient(timeout=LIMIT_S) as client:
            r = await client.post(keyed_server.url + CALLS, content=pc.localDescription.sdp,
                                  headers={"Authorization": f"Bearer {secret}",
                                           "Content-Type": "application/sdp"})
        assert r.status_code == 201, r.text
        await pc.setRemoteDescription(RTCSessionDescription(sdp=r.text, type="answer"))
        async with asyncio.timeout(LIMIT_S):
            await created.wait()
            channel.send(json.dumps({"type": "session.update", "event_id": "u1", "session": {
                "audio": {"input": {"transcription": {"model": "whisper"}}}}}))
            channel.send("not json")  # an error event; the call goes on
            await ended.wait()
            await asyncio.sleep(1.0)
            channel.send(json.dumps({"type": "session.close"}))
            await closed.wait()
        await asyncio.sleep(0.5)
        await pc.close()
        for task in recorders:
            task.cancel()
        return events, levels, r

    events, levels, answer = asyncio.run(main())
    assert answer.headers["content-type"].startswith("application/sdp")
    assert answer.headers["location"].startswith(CALLS + "/rtc_")
    assert "m=application" in answer.text and "webrtc-datachannel" in answer.text
    kinds = [e["type"] for e in events]
    assert kinds[0] == "session.created" and kinds[-1] == "session.closed", kinds
    assert events[0]["session"]["audio"]["output"]["language"] == "de"
    assert "session.updated" in kinds
    errors = [e for e in events if e["type"] == "error"]
    assert [e["error"]["code"] for e in errors] == ["invalid_json"], errors
    # speech is the track's, not events on the channel
    assert "session.output_audio.delta" not in kinds
    heard = _text(events, "session.input_transcript.delta")
    said = _text(events, "session.output_transcript.delta")
    assert wer(" ".join(SENTENCES), heard) <= 0.3, heard
    assert wer(" ".join(SENTENCES), said) > 0.7 and _german(said), said
    for text in (heard, said):
        assert text == text.strip() and "  " not in text
    voiced = sum(level > 300 for level in levels) * 0.02
    assert voiced > 1.0, (voiced, len(levels))  # the translation, spoken on the track


BROWSER_CALL = """async ([secret, calls]) => {
  window.events = []; window.level = 0; window.voiced = 0;
  const stream = await navigator.mediaDevices.getUserMedia({audio: true});
  const pc = new RTCPeerConnection();
  window.pc = pc;
  pc.ontrack = (e) => {
    const audio = new Audio(); audio.srcObject = e.streams[0]; audio.muted = true;
    audio.play();
    const ctx = new AudioContext();
    const analyser = ctx.createAnalyser(); analyser.fftSize = 1024;
    ctx.createMediaStreamSource(e.streams[0]).connect(analyser);
    const data = new Float32Array(analyser.fftSize);
    setInterval(() => {
      analyser.getFloatTimeDomainData(data);
      let sum = 0; for (const v of data) sum += v * v;
      const rms = Math.sqrt(sum / data.length);
      window.level = Math.max(window.level, rms);
      if (rms > 0.01) window.voiced += 1;
    }, 20);
  };
  stream.getTracks().forEach((t) => pc.addTrack(t, stream));
  const dc = pc.createDataChannel("oai-events");
  window.dc = dc;
  dc.onmessage = (e) => window.events.push(JSON.parse(e.data));
  const offer = await pc.createOffer();
  await pc.setLocalDescription(offer);
  const r = await fetch(calls, {method: "POST", body: offer.sdp,
    headers: {Authorization: `Bearer ${secret}`, "Content-Type": "application/sdp"}});
  if (!r.ok) return `${r.status} ${await r.text()}`;
  await pc.setRemoteDescription({type: "answer", sdp: await r.text()});
  return "ok";
}"""


@needs_espeak
@pytest.mark.skipif(CHROMIUM is None or ESPEAK is None,
                    reason="Debian packages 'chromium' and 'espeak-ng' are needed")
def test_chromium_runs_the_guides_browser_code_and_hears_the_translation(keyed_server,
                                                                         tmp_path) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    secret = _secret(keyed_server)
    # Chromium plays the file in a loop: a long silence after the talk keeps a second
    # round out of what the test reads
    wav = talk_wav(tmp_path, SENTENCES, lead_s=0.5, tail_s=60.0)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=chromium_args(microphone=wav, webrtc=True))
        page = browser.new_page()
        page.goto(keyed_server.url + "/health")
        assert page.evaluate(BROWSER_CALL, [secret, keyed_server.url + CALLS]) == "ok"
        said = ("window.events.filter(e => e.type === 'session.output_transcript.delta')"
                ".map(e => e.delta).join('')")
        page.wait_for_function(f"{said}.split(' ').length >= 8 && window.voiced > 25",
                               timeout=LIMIT_S * 1000)
        page.evaluate("window.dc.send(JSON.stringify({type: 'session.close'}))")
        page.wait_for_function("window.events.some(e => e.type === 'session.closed')",
                               timeout=LIMIT_S * 1000)
        events = page.evaluate("window.events")
        level = page.evaluate("window.level")
        browser.close()
    kinds = [e["type"] for e in events]
    assert kinds[0] == "session.created" and kinds[-1] == "session.closed", kinds
    assert "error" not in kinds, events
    text = _text(events, "session.output_transcript.delta")
    assert _german(text), text
    assert level > 0.01


# -- refusals: one clear 4xx each ------------------------------------------------------------

def _audio_offer() -> str:
    from aiortc import RTCPeerConnection

    async def make() -> str:
        pc = RTCPeerConnection()
        pc.addTransceiver("audio", direction="sendrecv")
        pc.createDataChannel("oai-events")
        await pc.setLocalDescription(await pc.createOffer())
        sdp = pc.localDescription.sdp
        await pc.close()
        return sdp

    return asyncio.run(make())


def _post(server: LiveServer, body: str | bytes, key: str | None = "key-1",
          content_type: str = "application/sdp", query: str = "?model=livetrans"
          ) -> httpx.Response:
    headers = {"Content-Type": content_type}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.post(server.url + CALLS + query, content=body, headers=headers, timeout=60)


def _check(r: httpx.Response, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["code"] == code and error["message"] and "Traceback" not in r.text, error


def test_calls_that_cannot_be_taken_get_one_clear_error(keyed_server) -> None:
    offer = _audio_offer()
    expired = ClientSecrets(["key-1"]).mint("key-1", {}, int(time.time()) - 1)
    _check(_post(keyed_server, offer, key=None), 401, "invalid_api_key")
    _check(_post(keyed_server, offer, key="wrong"), 401, "invalid_api_key")
    _check(_post(keyed_server, offer, key="ek_forged.secret"), 401, "invalid_client_secret")
    _check(_post(keyed_server, offer, key=expired), 401, "client_secret_expired")
    _check(_post(keyed_server, offer, content_type="application/json"), 415,
           "unsupported_media_type")
    _check(_post(keyed_server, offer, query=""), 400, "missing_model")
    _check(_post(keyed_server, offer, query="?model=gpt-realtime-translate"), 400,
           "model_not_found")
    _check(_post(keyed_server, "hello"), 400, "invalid_offer")
    _check(_post(keyed_server, b"v=0\r\n\xff\xfe"), 400, "invalid_offer")
    _check(_post(keyed_server, "v=0\r\n" + "a=x\r\n" * 20_000), 400, "invalid_offer")
    no_audio = "\r\n".join(line for line in offer.splitlines()
                           if not line.startswith("m=audio"))
    _check(_post(keyed_server, no_audio.split("m=application")[0]), 400,
           "offer_without_audio")
    r = httpx.post(keyed_server.url + CALLS + "/rtc_nope/hangup",
                   headers={"Authorization": "Bearer key-1"}, timeout=30)
    _check(r, 404, "call_not_found")


def test_a_call_is_hung_up_by_an_api_key_and_then_is_gone(
        keyed_server) -> None:
    from aiortc import RTCPeerConnection, RTCSessionDescription

    secret = _secret(keyed_server)

    async def main() -> tuple[int, int, int]:
        pc = RTCPeerConnection()
        pc.addTransceiver("audio", direction="sendrecv")
        pc.createDataChannel("oai-events")
        await pc.setLocalDescription(await pc.createOffer())
        async with httpx.AsyncClient(timeout=60) as client:
            r = await client.post(keyed_server.url + CALLS, content=pc.localDescription.sdp,
                                  headers={"Authorization": f"Bearer {secret}",
                                           "Content-Type": "application/sdp"})
            assert r.status_code == 201, r.text
            await pc.setRemoteDescription(RTCSessionDescription(sdp=r.text, type="answer"))
            hangup = keyed_server.url + r.headers["location"] + "/hangup"
            other = await client.post(hangup, headers={"Authorization": "Bearer wrong"})
            first = await client.post(hangup, headers={"Authorization": "Bearer key-1"})
            again = await client.post(hangup, headers={"Authorization": "Bearer key-1"})
        await pc.close()
        return other.status_code, first.status_code, again.status_code

    assert asyncio.run(main()) == (401, 200, 404)
