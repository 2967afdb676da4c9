"""Listening to a room's voice over WebRTC (WHEP, ``POST /v1/rooms/{room}/voice/{lang}/
whep``), on two real replicas (the real model) on Debian's redis-server, with API keys:
aiortc listeners on replica b, which holds no speaker, hear the English voice of German
talks spoken to replica a. One admitted to the room (the API key) joins before any talk
and hears two talks on one connection; one admitted by the first talk's viewer token hears
that talk and not the next. Whisper hears the room's English captions in what came. Then
the requests the route refuses, each with one clear status and code.

Waits are bounds against hanging, never latency assertions; the delays printed are for
the reader.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import httpx
import numpy as np
import pytest

pytest.importorskip("aiortc", reason="aiortc is the speech extra's")

from app.voice import espeak  # noqa: E402
from clients.room_listener import ListenRefused, RoomListener  # noqa: E402
from tests.conftest import LiveServer  # noqa: E402
from tests.redis_server import replicas_on_redis  # noqa: E402
from tests.room_talk import GERMAN, text_talk  # noqa: E402
from tests.speech import wer  # noqa: E402

KEY = "listen-test-key"
VOICED_RMS = 300  # int16 RMS of a 20 ms frame above this is speech (silence is ~0)
# measured: 0.000 (espeak-ng or Piper English, AAC pieces, Opus over WebRTC, Whisper base);
# the bound leaves room for a word Whisper hears differently, not for a lost phrase
MAX_WER = 0.25

pytestmark = pytest.mark.skipif(espeak.binary() is None, reason="espeak-ng missing")


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer,
                                                                        LiveServer]]:
    with replicas_on_redis(tmp_path_factory.mktemp("listen-redis"), api_keys=[KEY],
                           hls_segment_s=2, max_source_chars=2000,
                           live_max_listeners=3) as pair:
        yield pair


class Ear(threading.Thread):
    """A listener on its own event loop: every frame it hears, timed, until told to
    stop."""

    def __init__(self, url: str, room: str, **who: str) -> None:
        super().__init__(daemon=True)
        self.url, self.room, self.who = url, room, who
        self.frames: list[tuple[float, np.ndarray, int]] = []
        self.ready = threading.Event()
        self.stop_at: float | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._listen())
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
            self.ready.set()

    async def _listen(self) -> None:
        async with RoomListener(self.url, self.room, "en", **self.who) as listener:
            self.ready.set()
            async for heard in listener.audio():
                self.frames.append((heard.at, heard.pcm, heard.rate))
                if self.stop_at is not None and heard.at > self.stop_at:
                    return

    def voiced(self, since: float = 0.0, until: float = float("inf")) -> float:
        """Seconds of speech heard between two monotonic times."""
        return sum(len(pcm) / rate for at, pcm, rate in self.frames
                   if since <= at <= until and
                   np.sqrt((pcm.astype(np.float64) ** 2).mean()) > VOICED_RMS)

    def first_voiced_after(self, t: float) -> float | None:
        for at, pcm, _rate in self.frames:
            if at > t and np.sqrt((pcm.astype(np.float64) ** 2).mean()) > VOICED_RMS:
                return at
        return None

    def pcm16k(self) -> np.ndarray:
        audio = np.concatenate([pcm for _at, pcm, _rate in self.frames]).astype(np.float32)
        rate = self.frames[0][2]
        step = rate // 16000
        return (audio[: len(audio) // step * step].reshape(-1, step).mean(axis=1)
                / 32768.0).astype(np.float32)

    def wait_quiet(self, since: float, quiet_s: float = 3.0, limit_s: float = 120.0) -> None:
        """Until something was heard after ``since`` and then nothing for ``quiet_s`` (a
        talk's last words played out)."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            last = max((at for at, pcm, _rate in self.frames
                        if at > since
                        and np.sqrt((pcm.astype(np.float64) ** 2).mean()) > VOICED_RMS),
                       default=None)
            if last is not None and time.monotonic() - last > quiet_s:
                return
            time.sleep(0.2)

    def finish(self, after_s: float = 4.0) -> None:
        self.stop_at = time.monotonic() + after_s
        self.join(after_s + 30)
        assert not self.is_alive() and self.error is None, self.error


def test_listeners_on_the_other_replica_hear_the_room_within_their_access(
        replicas) -> None:
    a, b = replicas
    room = "listen-room"
    room_ear = Ear(b.url, room, api_key=KEY)  # the room: before any talk, on to the next
    room_ear.start()
    assert room_ear.ready.wait(60) and room_ear.error is None, room_ear.error
    talk_ears: list[Ear] = []

    def on_ready(ready: dict) -> None:  # the first talk's own viewer token
        ear = Ear(b.url, room, token=ready["viewer_token"])
        ear.start()
        assert ear.ready.wait(60) and ear.error is None, ear.error
        talk_ears.append(ear)

    started = time.monotonic()
    _, finals = text_talk(a.url, KEY, room, sentences=GERMAN, on_ready=on_ready)
    first_end = time.monotonic()
    room_ear.wait_quiet(started)  # the first talk's last words played out
    second_start = time.monotonic()
    _, finals2 = text_talk(a.url, KEY, room, sentences=GERMAN[:1])
    room_ear.finish()
    talk_ear = talk_ears[0]
    talk_ear.finish(0.0)

    heard_first = room_ear.voiced(started, second_start)
    heard_second = room_ear.voiced(second_start)
    print(f"room listener: {heard_first:.1f} s of speech in talk 1, {heard_second:.1f} s in "
          f"talk 2; talk listener: {talk_ear.voiced(started, second_start):.1f} s, then "
          f"{talk_ear.voiced(second_start):.1f} s")
    for final in finals + finals2:
        at = room_ear.first_voiced_after(final["_at"])
        print(f"final caption -> first speech heard after it: "
              f"{(at - final['_at']) if at else float('nan'):.2f} s")
    assert heard_first > 1.0 and heard_second > 1.0
    assert talk_ear.voiced(started, second_start) > 1.0
    assert talk_ear.voiced(second_start) == 0.0  # its token opens the first talk only

    pytest.importorskip("faster_whisper", reason="faster-whisper is not installed")
    from app.speech.whisper_stream import WhisperTranscriber, load_whisper

    words = WhisperTranscriber(load_whisper(threads=2)).transcribe(room_ear.pcm16k(), "en")
    heard = " ".join(w.text.strip() for w in words)
    said = " ".join(f["text"] for f in finals + finals2)
    error = wer(said, heard)
    print(f"said: {said}\nheard: {heard}\nWER {error:.3f}")
    assert error <= MAX_WER, (said, heard)
    assert first_end > started


def _offer() -> str:
    async def make() -> str:
        from aiortc import RTCPeerConnection

        pc = RTCPeerConnection()
        pc.addTransceiver("audio", direction="recvonly")
        await pc.setLocalDescription(await pc.createOffer())
        sdp = pc.localDescription.sdp
        await pc.close()
        return sdp

    return asyncio.run(make())


def test_refusals_each_say_what_was_wrong(replicas) -> None:
    _a, b = replicas
    url = f"{b.url}/v1/rooms/refusals/voice/en/whep"
    sdp = {"Content-Type": "application/sdp"}
    key = {"Authorization": f"Bearer {KEY}"}

    def code(r: httpx.Response) -> tuple[int, str]:
        return r.status_code, r.json()["error"]["code"]

    assert code(httpx.post(url, content=_offer(), headers=sdp)) == (401, "invalid_token")
    assert code(httpx.post(url + "?token=" + "0" * 32, content=_offer(), headers=sdp)) == \
        (401, "invalid_token")
    assert code(httpx.post(url, content=_offer(), headers={**key})) == \
        (415, "unsupported_media_type")
    assert code(httpx.post(url, content="hello", headers={**key, **sdp})) == \
        (400, "invalid_offer")
    assert code(httpx.post(url, content=b"v=0\r\n\xff", headers={**key, **sdp})) == \
        (400, "invalid_offer")
    assert code(httpx.post(f"{b.url}/v1/rooms/no%20room/voice/en/whep", content=_offer(),
                           headers={**key, **sdp})) == (404, "invalid_room")
    assert code(httpx.post(f"{b.url}/v1/rooms/r/voice/xx-nope/whep", content=_offer(),
                           headers={**key, **sdp})) == (404, "unsupported_language")
    assert code(httpx.delete(url + "/" + "ab" * 16, headers=key)) == \
        (404, "listener_not_found")

    async def crowd() -> None:
        listeners = [RoomListener(b.url, "refusals", "en", api_key=KEY) for _ in range(3)]
        for listener in listeners:
            await listener.__aenter__()
        async with httpx.AsyncClient() as http:  # counted on /metrics, by language
            text = (await http.get(f"{b.url}/metrics", headers=key)).text
        assert 'livetrans_voice_listeners{lang="en"} 3.0' in text
        with pytest.raises(ListenRefused) as refused:
            async with RoomListener(b.url, "refusals", "en", api_key=KEY):
                pass
        assert refused.value.status == 503
        assert refused.value.error["code"] == "too_many_listeners"
        await listeners[0].close()  # DELETE: a place is free again
        async with RoomListener(b.url, "refusals", "en", api_key=KEY):
            pass
        for listener in listeners[1:]:
            await listener.close()

    asyncio.run(crowd())
