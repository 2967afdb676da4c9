"""A speaker's talk (``app.rooms.talk``) without a model or a socket: the room claimed and
released, captions to the room's viewers, finals to the transcript, once per language."""

from __future__ import annotations

import asyncio

import pytest

from app.rooms.bus.local import LocalBus
from app.rooms.registry import RoomRegistry, RoomTakenError
from app.rooms.talk import Talk
from app.rooms.transcripts.store import TalkRecord, TranscriptLine


class FakeRecorder:
    def __init__(self) -> None:
        self.talks: list[TalkRecord] = []
        self.lines: list[tuple[str, str, str, TranscriptLine]] = []

    def start_talk(self, talk: TalkRecord) -> None:
        self.talks.append(talk)

    def line(self, room: str, talk_id: str, lang: str, line: TranscriptLine) -> None:
        self.lines.append((room, talk_id, lang, line))

    def written(self) -> asyncio.Future[None]:
        done = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


def _caption(segment: int, lang: str, final: bool) -> tuple[dict, str]:
    payload = {"type": "caption", "segment": segment, "lang": lang, "final": final,
               "source": "hello", "text": f"{lang}:hello"}
    return payload, f"frame {segment} {lang} {final}"


def test_a_talk_claims_publishes_transcribes_and_releases() -> None:
    async def scenario() -> None:
        rooms, recorder = RoomRegistry(), FakeRecorder()
        talk = Talk(rooms, "speaker", LocalBus(), recorder, "r1")  # type: ignore[arg-type]
        talk.publish(*_caption(0, "de", True))  # no room yet: nothing happens
        room = await talk.open("hall", ["de", "ja"])
        assert talk.info is not None and talk.info.replica == "r1"
        assert [t.room for t in recorder.talks] == ["hall"]
        with pytest.raises(RoomTakenError):
            await Talk(rooms, "rival").open("hall", ["de"])
        viewer, _ = rooms.join("hall", "de", max_viewers=10, max_per_room=10)
        talk.publish(*_caption(0, "de", False))
        talk.publish(*_caption(0, "de", True))
        talk.publish(*_caption(0, "ja", True))
        assert [f.text for f in iter(viewer.queue.pop, None)] == [
            "frame 0 de False", "frame 0 de True"]
        assert [(lang, line.segment, line.text) for _, _, lang, line in recorder.lines] == [
            ("de", 0, "de:hello"), ("ja", 0, "ja:hello")]
        assert not talk._first and not talk._finals  # every language has its final
        await talk.finish(wait_s=1)
        assert talk.room is None and talk.info is None and viewer.queue.closed
        assert room.speaker is None

    asyncio.run(scenario())
