"""WHIP ingest (``POST /v1/rooms/{room}/whip``, RFC 9725) with a real WebRTC peer: aiortc as
the publisher (as OBS would be), sending espeak-ng speech as Opus over loopback; the room's
viewers get the recognised finals and their translations. And the offers, requests and
second publishers the route refuses, each with one clear 4xx."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import httpx
import pytest
import websockets

from tests.conftest import LiveServer
from tests.speech import SENTENCES, needs_espeak, talk_wav, wer
from tests.whip_offers import Transport, m_lines, obs_offer, without_section

aiortc = pytest.importorskip("aiortc", reason="aiortc (livetrans[speech]) is not installed")
WAIT_S = 300  # a bound against hanging, never a latency


def _wav(tmp_path: Path, sentences: list[str]) -> Path:
    return talk_wav(tmp_path, sentences)


async def _offer(pc, track=None) -> str:  # noqa: ANN001
    if track is not None:
        pc.addTrack(track)
    else:
        pc.addTransceiver("audio", direction="sendonly")
    await pc.setLocalDescription(await pc.createOffer())
    return pc.localDescription.sdp


def _whip_url(server, room: str, langs: str = "de") -> str:
    return f"{server.url}/v1/rooms/{room}/whip?target_langs={langs}"


@needs_espeak
def test_a_webrtc_publisher_speaks_into_a_room_and_viewers_get_the_finals(
        live_server, tmp_path) -> None:
    from aiortc import RTCPeerConnection, RTCSessionDescription
    from aiortc.contrib.media import MediaPlayer

    room = "whip-" + uuid.uuid4().hex[:8]
    wav = _wav(tmp_path, SENTENCES)

    async def main() -> tuple[list[dict], int]:
        viewer: list[dict] = []
        pc = RTCPeerConnection()
        player = MediaPlayer(str(wav))
        played = asyncio.Event()

        @player.audio.on("ended")
        def on_ended() -> None:
            played.set()

        async with httpx.AsyncClient(timeout=WAIT_S) as client:
            offer = await _offer(pc, player.audio)
            r = await client.post(_whip_url(live_server, room, "de,ja"), content=offer,
                                  headers={"Content-Type": "application/sdp"})
            assert r.status_code == 201, r.text
            assert r.headers["content-type"].startswith("application/sdp")
            location = r.headers["location"]
            assert location.startswith(f"/v1/rooms/{room}/whip/")
            await pc.setRemoteDescription(RTCSessionDescription(sdp=r.text, type="answer"))
            url = live_server.url.replace("http://", "ws://")
            async with websockets.connect(f"{url}/v1/live/watch?room={room}&lang=de") as watch:
                assert json.loads(await watch.recv())["type"] == "joined"
                await asyncio.wait_for(played.wait(), WAIT_S)
                await asyncio.sleep(1.0)  # the last packets cross the loopback
                deleted = await client.delete(live_server.url + location)
                async with asyncio.timeout(WAIT_S):
                    async for raw in watch:
                        viewer.append(json.loads(raw))
                        if viewer[-1]["type"] == "ended":
                            break
            again = await client.delete(live_server.url + location)
        await pc.close()
        return viewer, deleted.status_code, again.status_code

    viewer, deleted, again = asyncio.run(main())
    assert deleted == 200 and again == 404
    finals = [f for f in viewer if f["type"] == "caption" and f["final"]]
    heard = " ".join(f["source"] for f in finals)
    assert wer(" ".join(SENTENCES), heard) <= 0.35, heard
    assert all(f["text"].strip() for f in finals)
    assert [f["segment"] for f in finals] == list(range(len(finals)))
    assert viewer[-1]["type"] == "ended"


def _post(server, room: str, sdp: str | bytes, content_type: str = "application/sdp",
          langs: str = "de", headers: dict | None = None) -> httpx.Response:
    return httpx.post(_whip_url(server, room, langs), content=sdp, timeout=120,
                      headers={"Content-Type": content_type, **(headers or {})})


def _audio_offer() -> str:
    from aiortc import RTCPeerConnection

    async def main() -> str:
        pc = RTCPeerConnection()
        try:
            return await _offer(pc)
        finally:
            await pc.close()

    return asyncio.run(main())


def test_bad_offers_and_requests_get_one_clear_4xx(live_server) -> None:
    offer = _audio_offer()
    video_only = "\r\n".join(line for line in offer.replace("m=audio", "m=video")
                             .replace("opus/48000/2", "VP8/90000").splitlines())
    no_codec = offer.replace("opus/48000/2", "G722/8000").replace("PCMU/8000", "G729/8000") \
                    .replace("PCMA/8000", "iLBC/8000")
    cases = [
        (_post(live_server, "r1", offer, content_type="text/plain"), 415,
         "unsupported_media_type", None),
        (_post(live_server, "r1", "hello"), 400, "invalid_offer", "sdp"),
        (_post(live_server, "r1", b"\xff\xfe"), 400, "invalid_offer", "sdp"),
        (_post(live_server, "r1", video_only), 400, "offer_without_audio", "sdp"),
        (_post(live_server, "r1", no_codec), 400, "unsupported_codec", "sdp"),
        (_post(live_server, "-bad room", offer), 400, "invalid_room", "room"),
        (_post(live_server, "r1", offer, langs=""), 400, "invalid_request", "target_langs"),
        (_post(live_server, "r1", offer, langs="xx"), 400, "unsupported_language",
         "target_langs"),
    ]
    for response, status, code, param in cases:
        body = response.json()
        assert response.status_code == status, body
        assert body["error"]["code"] == code and body["error"]["param"] == param, body
    gone = httpx.delete(f"{live_server.url}/v1/rooms/r1/whip/nope", timeout=30)
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "whip_session_not_found"


def test_a_second_publisher_for_a_room_with_a_speaker_is_a_conflict(live_server) -> None:
    room = "taken-" + uuid.uuid4().hex[:8]
    url = live_server.url.replace("http://", "ws://") + "/v1/live"
    offer = _audio_offer()

    async def main() -> httpx.Response:
        async with websockets.connect(url) as ws:
            await ws.send(json.dumps({"type": "start", "target_lang": "de", "room": room}))
            assert json.loads(await ws.recv())["type"] == "ready"
            return await asyncio.to_thread(_post, live_server, room, offer)

    response = asyncio.run(main())
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "room_taken"


def test_with_api_keys_a_publisher_needs_one_and_only_it_ends_its_session() -> None:
    with LiveServer(api_keys=["whip-key", "other-tenant"]) as server:
        offer = _audio_offer()
        refused = _post(server, "keyed", offer)
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "invalid_api_key"
        admitted = _post(server, "keyed", offer, headers={"Authorization": "Bearer whip-key"})
        assert admitted.status_code == 201, admitted.text
        location = admitted.headers["location"]
        other = httpx.delete(server.url + location, timeout=WAIT_S,
                             headers={"Authorization": "Bearer other-tenant"})
        assert other.status_code == 404  # as if there were none: nothing to learn
        assert other.json()["error"]["code"] == "whip_session_not_found"
        ended = httpx.delete(server.url + location, timeout=WAIT_S,
                             headers={"Authorization": "Bearer whip-key"})
        assert ended.status_code == 200


@pytest.mark.parametrize("video", ["h264", "av1", "hevc"])
def test_an_offer_as_obs_writes_it_is_answered_for_the_sound_with_the_video_declined(
        live_server, video: str) -> None:
    room = f"obs-{video}-" + uuid.uuid4().hex[:8]
    answer = _post(live_server, room, obs_offer(video))
    assert answer.status_code == 201, answer.text
    # the offer's sections in the offer's order; the video rejected (port 0), unbundled
    assert m_lines(answer.text)[0].startswith("m=audio ")
    assert m_lines(answer.text)[1] == "m=video 0 UDP/TLS/RTP/SAVPF 96"
    assert "a=group:BUNDLE 0\r\n" in answer.text and "a=rtpmap:111 opus/48000/2" in answer.text
    ended = httpx.delete(live_server.url + answer.headers["location"], timeout=WAIT_S)
    assert ended.status_code == 200


def test_a_publisher_with_obs_shaped_offer_connects_and_its_sound_arrives(
        live_server) -> None:
    """A real aiortc peer publishes with its own ICE and DTLS in OBS's layout (session-level
    attributes, ``group:LS``, audio first) and AV1 video beside the sound; it takes the
    answer without the declined video, as OBS drops a rejected track."""
    from aiortc import RTCPeerConnection, RTCSessionDescription
    from aiortc.contrib.media import MediaPlayer

    room = "obs-real-" + uuid.uuid4().hex[:8]

    async def main() -> tuple[str, int, float]:
        pc = RTCPeerConnection()
        player = MediaPlayer("anullsrc=r=48000:cl=mono", format="lavfi")
        pc.addTrack(player.audio)
        await pc.setLocalDescription(await pc.createOffer())
        offer = obs_offer("av1", Transport.of(pc.localDescription.sdp))
        connected = asyncio.Event()

        @pc.on("connectionstatechange")
        def on_state() -> None:
            if pc.connectionState == "connected":
                connected.set()

        async with httpx.AsyncClient(timeout=WAIT_S) as client:
            r = await client.post(_whip_url(live_server, room), content=offer,
                                  headers={"Content-Type": "application/sdp"})
            assert r.status_code == 201, r.text
            answer = without_section(r.text, "1")
            await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
            await asyncio.wait_for(connected.wait(), WAIT_S)
            session = next(s for s in live_server.state.whip.sessions.values()
                           if s.room == room)
            async with asyncio.timeout(WAIT_S):
                while session.socket.received_s <= 0:
                    await asyncio.sleep(0.1)
            received = session.socket.received_s
            state = pc.connectionState
            deleted = await client.delete(live_server.url + r.headers["location"])
        await pc.close()
        player.audio.stop()
        return state, deleted.status_code, received

    state, deleted, received = asyncio.run(main())
    assert state == "connected" and deleted == 200 and received > 0


def test_a_talk_not_ready_in_time_is_refused_and_leaves_the_room_free() -> None:
    with LiveServer() as server:
        server.state.whip.ready_wait_s = 0  # the speech model is "still loading"
        room = "slow-" + uuid.uuid4().hex[:8]
        refused = _post(server, room, obs_offer("h264"))
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == "not_ready"
        assert refused.headers["retry-after"]
        url = server.url.replace("http://", "ws://") + "/v1/live"

        async def speak() -> dict:
            async with websockets.connect(url) as ws:
                await ws.send(json.dumps({"type": "start", "target_lang": "de",
                                          "room": room}))
                return json.loads(await ws.recv())

        assert asyncio.run(speak())["type"] == "ready"  # the refused talk holds nothing


def test_an_offer_with_video_as_obs_sends_it_is_answered_for_the_sound_only(
        live_server) -> None:
    from aiortc import RTCPeerConnection

    async def offer() -> str:
        pc = RTCPeerConnection()
        try:
            pc.addTransceiver("video", direction="sendonly")
            return await _offer(pc)
        finally:
            await pc.close()

    room = "obs-" + uuid.uuid4().hex[:8]
    sdp = asyncio.run(offer())
    assert sdp.index("m=video") < sdp.index("m=audio")
    answer = _post(live_server, room, sdp)
    assert answer.status_code == 201, answer.text
    video = answer.text[answer.text.index("m=video"):answer.text.index("m=audio")]
    assert "a=inactive" in video
    ended = httpx.delete(live_server.url + answer.headers["location"], timeout=WAIT_S)
    assert ended.status_code == 200


def _mangle(find: str, replace: str) -> str:
    offer = obs_offer("av1")
    assert find in offer
    return offer.replace(find, replace)


@pytest.mark.parametrize("offer", [
    _mangle("a=ice-pwd:", "a=x-ice-pwd:"),  # no ICE password
    _mangle("a=setup:actpass", "a=setup:sideways"),
    _mangle("a=rtcp-mux\r\na=rtpmap:111", "a=rtpmap:111"),  # audio without RTCP mux
    _mangle("SAVPF 111\r\n", "SAVPF 111 72\r\n"),  # a payload type RTCP owns
    _mangle("SAVPF 111\r\n", "SAVPF 111 x\r\n"),
    _mangle("a=fmtp:111", "a=fmtp:112 y=1\r\na=fmtp:111"),  # fmtp of no codec
    _mangle("a=candidate:1 1 UDP", "a=candidate:1 1"),
], ids=["no-ice-pwd", "bad-setup", "no-rtcp-mux", "pt-72", "pt-text", "stray-fmtp",
        "short-candidate"])
def test_an_offer_aiortc_cannot_answer_is_one_400_never_a_500(live_server, offer) -> None:
    room = "bad-" + uuid.uuid4().hex[:8]
    r = _post(live_server, room, offer)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "invalid_offer" and r.json()["error"]["param"] == "sdp"
    assert "Traceback" not in r.text


def test_an_empty_group_line_is_no_500(live_server) -> None:
    r = _post(live_server, "grp-" + uuid.uuid4().hex[:8],
              _mangle("a=group:LS 0 1", "a=group:"))
    assert r.status_code == 201, r.text  # an empty group groups nothing: dropped
    assert httpx.delete(live_server.url + r.headers["location"],
                        timeout=WAIT_S).status_code == 200


def test_g711_by_static_payload_type_alone_is_answered(live_server) -> None:
    """PCMU (0) and PCMA (8) need no ``a=rtpmap`` (RFC 3551); aiortc's offer without them."""
    offer = _audio_offer()
    m_line = next(line for line in offer.splitlines() if line.startswith("m=audio"))
    bare = offer.replace(m_line, " ".join(m_line.split()[:3] + ["0", "8"]))
    bare = "\r\n".join(line for line in bare.splitlines()
                       if not line.startswith(("a=rtpmap:", "a=fmtp:"))) + "\r\n"
    assert "a=rtpmap" not in bare
    answer = _post(live_server, "g711-" + uuid.uuid4().hex[:8], bare)
    assert answer.status_code == 201, answer.text
    assert "a=rtpmap:0 PCMU/8000" in answer.text
    assert httpx.delete(live_server.url + answer.headers["location"],
                        timeout=WAIT_S).status_code == 200
