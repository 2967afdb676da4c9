"""``livetrans caption --audio SOURCE --room R`` end to end: espeak-ng speech encoded by
Debian's ffmpeg (M4A, Opus, an MP4 with a video track), a live HLS stream served on
loopback, an RTMP source (``ffmpeg -listen 1``) and one that stops mid-talk and comes back,
each read by the client's PyAV, recognised by the real server's Whisper, and followed by a
viewer of the room: the recognised finals and their translations reach the viewers.

Every wait is a bound against hanging; nothing is timed.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import websockets

from eval.local_server import free_port
from tests.clients.media import (
    encode,
    hls_live,
    needs_ffmpeg,
    rtmp_server,
    served_folder,
    udp_send,
    wait_for,
    write_pcm_wav,
)
from tests.clients.test_audio import LIVETRANS, _env
from tests.speech import ESPEAK, SENTENCES, talk, wer

pytestmark = [needs_ffmpeg, pytest.mark.skipif(ESPEAK is None, reason="Debian package "
                                               "'espeak-ng' is not installed")]


@pytest.fixture(scope="module")
def speech(tmp_path_factory) -> dict[str, Path]:
    """The two sentences as one talk, and each alone (for a source that drops between)."""
    folder = tmp_path_factory.mktemp("speech")
    out = {}
    for name, sentences in (("talk", SENTENCES), ("first", SENTENCES[:1]),
                            ("second", SENTENCES[1:])):
        samples, rate = talk(folder, sentences)
        out[name] = write_pcm_wav(folder / f"{name}.wav", samples.astype(float), rate)
    return out


class Captioner:
    """``livetrans caption`` in its own process, its stdout and stderr read as they come."""

    def __init__(self, server_url: str, source: str, room: str, *extra: str) -> None:
        self.out: list[str] = []
        self.err: list[str] = []
        self.proc = subprocess.Popen(
            [LIVETRANS, "caption", "--audio", source, "--room", room, "--target-lang", "de",
             "--quiet", "--json", "--server", server_url, *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=_env(PYTHONUNBUFFERED="1"))
        self._readers = [threading.Thread(target=self._read, args=(pipe, lines), daemon=True)
                         for pipe, lines in ((self.proc.stdout, self.out),
                                             (self.proc.stderr, self.err))]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(pipe, lines: list[str]) -> None:  # noqa: ANN001
        for line in pipe:
            lines.append(line.rstrip("\n"))

    def wait_for_line(self, lines: list[str], text: str) -> None:
        wait_for(lambda: any(text in line for line in lines) or self.proc.poll() is not None,
                 f"{text!r} from livetrans caption", limit=180)
        assert any(text in line for line in lines), (self.out, self.err)

    def stats(self) -> dict:
        assert self.proc.wait(600) == 0, self.err[-20:]
        for reader in self._readers:
            reader.join(30)
        return json.loads(self.out[-1])

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)


@contextmanager
def captioning(server_url: str, source: str, *extra: str) -> Iterator[tuple[Captioner, list]]:
    """The captioner, and the final captions a viewer of its room receives, in segment
    order (complete once the room has ended, which leaving the block waits for)."""
    room = "src-" + uuid.uuid4().hex[:8]
    client = Captioner(server_url, source, room, *extra)
    finals: list[dict] = []
    try:
        client.wait_for_line(client.err, "viewers watch at")  # --json: links on stderr
        viewer = threading.Thread(target=lambda: asyncio.run(
            _follow(server_url, room, finals)), daemon=True)
        viewer.start()
        yield client, finals
        viewer.join(300)
        assert not viewer.is_alive(), "the viewer never saw the room end"
    finally:
        client.kill()


async def _follow(server_url: str, room: str, finals: list[dict]) -> None:
    """A viewer of ``room`` in German: its final captions into ``finals`` as they come,
    from ``joined`` (the finals so far) to ``ended``."""
    url = server_url.replace("http://", "ws://") + f"/v1/live/watch?room={room}&lang=de"
    async with asyncio.timeout(300), websockets.connect(url, max_size=None) as ws:
        async for raw in ws:
            msg = json.loads(raw)
            got = msg.get("recent", []) if msg["type"] == "joined" else [msg]
            for caption in got:
                if caption.get("type", "caption") == "caption" and caption.get("final") \
                        and all(c["segment"] != caption["segment"] for c in finals):
                    finals.append(caption)
                    finals.sort(key=lambda c: c["segment"])
            if msg["type"] == "ended":
                return


def assert_heard(finals: list[dict], stats: dict) -> None:
    """Each sentence recognised (loosely: espeak and Whisper base) and translated, once."""
    assert stats["finals"] == len(SENTENCES) and stats["errors"] == 0, stats
    assert [c["segment"] for c in finals] == list(range(len(SENTENCES))), finals
    for ref, caption in zip(SENTENCES, finals, strict=True):
        assert wer(ref, caption["source"]) <= 0.5, caption["source"]
        assert caption["text"].strip()


@pytest.mark.parametrize("kind", ["m4a", "opus", "mp4"])
def test_a_file_of_any_format_reaches_the_rooms_viewers(live_server, speech, tmp_path,
                                                        kind) -> None:
    media = encode(speech["talk"], kind, tmp_path / f"talk.{kind}")
    # --realtime: the talk lasts as long as it was spoken, as if it were live
    with captioning(live_server.url, str(media), "--realtime") as (client, finals):
        stats = client.stats()
    assert_heard(finals, stats)


def test_a_live_hls_stream_reaches_the_rooms_viewers(live_server, speech, tmp_path) -> None:
    with hls_live(speech["talk"], tmp_path / "hls") as producer, \
            served_folder(tmp_path / "hls") as base:
        with captioning(live_server.url, f"{base}/live.m3u8") as (client, finals):
            stats = client.stats()  # the stream's #EXT-X-ENDLIST ends the talk
        assert producer.wait(60) == 0
    assert_heard(finals, stats)
    assert not any("dropped" in line for line in client.err), client.err


def test_an_rtmp_source_that_drops_and_comes_back(live_server, speech, tmp_path) -> None:
    """The encoder stops after the first sentence and comes back for the second: the
    client says so, reopens it, and the talk goes on in the same room."""
    port = free_port()
    url = f"rtmp://127.0.0.1:{port}/live/talk"
    first, second = (encode(speech[n], "m4a", tmp_path / f"{n}.m4a") for n in ("first", "second"))
    with rtmp_server(first, port), \
            captioning(live_server.url, url, "--reconnect-for", "15") as (client, finals):
        client.wait_for_line(client.err, "reopening")
        with rtmp_server(second, port):
            client.wait_for_line(client.err, "reopened")
            stats = client.stats()  # gone for good: the client gives up, the talk ends
    assert_heard(finals, stats)
    assert any("the talk ends here" in line for line in client.err), client.err


def test_ctrl_c_ends_a_live_udp_talk_and_its_last_words_are_captioned(
        live_server, speech, tmp_path) -> None:
    """A UDP sender that never stops (the talk on a loop): Ctrl-C once the viewer has seen
    a final ends the talk; what was said until then is still recognised and translated."""
    url = f"udp://127.0.0.1:{free_port()}"
    talk_m4a = encode(speech["talk"], "m4a", tmp_path / "talk.m4a")
    sender = udp_send(talk_m4a, url, loop=True)
    try:
        with captioning(live_server.url, url) as (client, finals):
            wait_for(lambda: finals or client.proc.poll() is not None, "a final", limit=300)
            client.proc.send_signal(signal.SIGINT)
            stats = client.stats()
    finally:
        sender.kill()
        sender.wait(10)
    assert stats["errors"] == 0 and stats["finals"] >= 1
    assert len(finals) == stats["finals"]  # every final the speaker got, the viewer got
    assert all(c["text"].strip() and c["source"].strip() for c in finals)
    assert any("ending the talk" in line for line in client.err), client.err
