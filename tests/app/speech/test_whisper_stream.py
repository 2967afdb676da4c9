"""The streaming recogniser on real speech: espeak-ng (Debian, ``make system-deps``) says two
sentences with a pause; Whisper base (the bundled CTranslate2 weights) hears them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from app.speech.whisper_stream import SAMPLE_RATE, StreamingWhisper
from clients.audio import WavReader, wav_pcm_blocks

SENTENCES = ["The committee will publish its final report next spring.",
             "Thank you all for coming to this talk today."]


def _speech(tmp_path: Path, text: str) -> np.ndarray:
    path = tmp_path / f"{abs(hash(text))}.wav"
    subprocess.run(["espeak-ng", "-v", "en-us", "-s", "150", "-w", str(path), text], check=True)
    reader = WavReader(path)
    pcm = b"".join(wav_pcm_blocks(reader))
    return np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768.0


def _words(text: str) -> list[str]:
    return [w.strip(".,!?").lower() for w in text.split()]


def _wer(ref: str, hyp: str) -> float:
    r, h = _words(ref), _words(hyp)
    d = list(range(len(h) + 1))
    for i, rw in enumerate(r, 1):
        prev, d[0] = d[0], i
        for j, hw in enumerate(h, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (rw != hw))
    return d[-1] / len(r)


@pytest.fixture(scope="module")
def recogniser() -> StreamingWhisper:
    return StreamingWhisper(threads=2)


def test_partials_grow_and_each_sentence_becomes_one_final(tmp_path, recogniser) -> None:
    pause = np.zeros(int(1.2 * SAMPLE_RATE), dtype=np.float32)
    audio = np.concatenate([_speech(tmp_path, SENTENCES[0]), pause,
                            _speech(tmp_path, SENTENCES[1]), pause])
    events = []
    chunk = SAMPLE_RATE // 4  # 250 ms frames, as a microphone sends them
    for i in range(0, len(audio), chunk):
        events += recogniser.feed(audio[i:i + chunk])
    events += recogniser.flush()
    finals = [e for e in events if e.kind == "final"]
    assert [e.segment for e in finals] == [0, 1]
    for ref, final in zip(SENTENCES, finals, strict=True):
        assert _wer(ref, final.text) <= 0.3, (ref, final.text)
    partials = [e for e in events if e.kind == "partial" and e.segment == 0]
    assert partials, "no partial before the first final"
    assert len(partials[0].text) <= len(finals[0].text)


def test_silence_is_dropped_and_costs_no_memory(recogniser) -> None:
    silence = np.zeros(SAMPLE_RATE // 2, dtype=np.float32)
    events = []
    for _ in range(120):  # a minute of silence
        events += recogniser.feed(silence)
    assert not [e for e in events if e.text]
    assert len(recogniser.buffer) <= 2 * SAMPLE_RATE
    noise = (np.random.default_rng(0).standard_normal(SAMPLE_RATE) * 0.01).astype(np.float32)
    recogniser.feed(noise[: SAMPLE_RATE // 2])
    assert recogniser.flush() == []  # silence and hiss are never decoded into words


def test_a_missing_or_incomplete_model_folder_is_one_sentence(tmp_path) -> None:
    from app.speech.model_files import SpeechModelError, resolve_asr_model

    with pytest.raises(SpeechModelError, match="not found"):
        resolve_asr_model(tmp_path / "nothing")
    with pytest.raises(SpeechModelError, match="no model.bin"):
        resolve_asr_model(tmp_path)
    (tmp_path / "f.bin").write_bytes(b"x")
    with pytest.raises(SpeechModelError, match="is a file"):
        resolve_asr_model(tmp_path / "f.bin")
