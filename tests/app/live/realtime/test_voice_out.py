"""A leg's commits spoken as audio deltas: 24 kHz PCM16 mono, base64, decodable, voiced.

The voice here is espeak-ng itself (22050 Hz), behind the voice stream's shape: commits
in, chunks out, ``close`` after what is queued."""

from __future__ import annotations

import asyncio
import base64
import subprocess
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.live.realtime.voice_out import OUTPUT_RATE, VoiceOut, to_output_rate
from app.translation.commits import Commit
from tests.speech import ESPEAK, needs_espeak


@dataclass
class Chunk:
    pcm: bytes
    sample_rate: int


class EspeakVoice:
    """Each commit's delta said by espeak-ng, in commit order."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        self.aborted = False

    def committed(self, commit: Commit) -> None:
        self.queue.put_nowait(commit.delta)

    def _say(self, text: str) -> Chunk:
        path = self.tmp_path / "say.wav"
        subprocess.run([ESPEAK or "espeak-ng", "-v", "de", "-w", str(path), text], check=True)
        with wave.open(str(path)) as w:
            return Chunk(w.readframes(w.getnframes()), w.getframerate())

    async def chunks(self):
        while (text := await self.queue.get()) is not None:
            yield await asyncio.to_thread(self._say, text)

    async def close(self, timeout_s: float | None = None) -> None:
        self.queue.put_nowait(None)

    def abort(self) -> None:
        self.aborted = True


def test_resampling_to_24_khz_keeps_the_length_and_passes_24_khz_through() -> None:
    pcm = (np.sin(np.arange(22050) / 10) * 8000).astype("<i2").tobytes()
    out, resampler = to_output_rate(pcm, 22050, None)
    assert abs(len(out) // 2 - 24000) <= 2 and resampler is not None
    same, none = to_output_rate(pcm, OUTPUT_RATE, None)
    assert same == pcm and none is None


@needs_espeak
def test_commits_become_decodable_voiced_audio_deltas(tmp_path: Path) -> None:
    sent: list[dict] = []

    async def main() -> EspeakVoice:
        async def send(event: dict) -> None:
            sent.append(event)

        voice = EspeakVoice(tmp_path)
        out = VoiceOut(voice, send, lambda: 400)
        out.committed(0, "de", "Guten Morgen", "Guten Morgen")
        out.committed(0, "de", "Guten Morgen, meine Damen und Herren", ", meine Damen und Herren")
        await out.finish(timeout_s=60)
        return voice

    voice = asyncio.run(main())
    assert sent and voice.aborted  # finished, then stopped
    audio = b""
    for event in sent:
        assert event["type"] == "session.output_audio.delta"
        assert (event["format"], event["sample_rate"], event["channels"]) == ("pcm16",
                                                                             24000, 1)
        assert event["elapsed_ms"] == 400 and event["event_id"].startswith("event_")
        pcm = base64.b64decode(event["delta"], validate=True)
        assert len(pcm) % 2 == 0 and len(pcm) <= 2 * OUTPUT_RATE
        audio += pcm
    samples = np.frombuffer(audio, dtype="<i2").astype(np.float64)
    assert len(samples) / OUTPUT_RATE > 1.0  # both phrases, at 24 kHz
    frames = samples[: len(samples) // 480 * 480].reshape(-1, 480)  # 20 ms frames
    loud = np.sqrt((frames ** 2).mean(axis=1)) > 500
    assert loud.mean() > 0.3  # voiced: most of it is speech, not silence
