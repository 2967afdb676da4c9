"""``livetrans caption --audio``: WAV reading, resampling, chunking, and speech to captions.

The first half is pure signal logic on synthetic tones (no ASR). The end-to-end tests
synthesise English speech with espeak-ng (Debian package ``espeak-ng``; skipped without it),
run the embedded PocketSphinx recogniser on it and send the result through the real server.
PocketSphinx on synthetic speech is rough, so the words are checked only loosely.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from app.usage import UsageError
from clients.audio import (
    RATE,
    WavReader,
    downmix,
    open_audio,
    paced,
    rechunk,
    wav_pcm_blocks,
)
from tests.app.test_cli import _one_line_error as assert_one_line_error
from tests.speech import needs_espeak, wer

LIVETRANS = shutil.which("livetrans", path=str(Path(sys.executable).parent)) or "livetrans"
ESPEAK = shutil.which("espeak-ng")
SENTENCES = ["Welcome to the conference about live translation.",
             "Today we talk about speech and captions for everyone."]


def tone(freq: float, rate: int, seconds: float = 1.0, amp: float = 10000.0) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return amp * np.sin(2 * np.pi * freq * t)


def write_wav(path: Path, samples: np.ndarray, rate: int, *, bits: int = 16,
              encoding: str = "pcm", extensible: bool = False) -> Path:
    """A WAV of ``samples`` (``(n,)`` or ``(n, channels)``, int16 scale), any encoding.

    Written by hand rather than with ``wave``, which writes neither float nor extensible.
    """
    x = samples.reshape(len(samples), -1)
    channels = x.shape[1]
    if encoding == "float":
        data = (x / 32768.0).astype("<f4" if bits == 32 else "<f8").tobytes()
        tag = 3
    elif bits == 8:
        data = np.clip(np.round(x / 256.0) + 128, 0, 255).astype(np.uint8).tobytes()
        tag = 1
    elif bits == 16:
        data = np.clip(np.round(x), -32768, 32767).astype("<i2").tobytes()
        tag = 1
    elif bits == 24:
        v = np.round(x * 256).astype("<i4").reshape(-1, 1).view(np.uint8).reshape(-1, 4)
        data = v[:, :3].tobytes()
        tag = 1
    else:
        data = np.round(x * 65536).astype("<i4").tobytes()
        tag = 1
    block = channels * bits // 8
    fmt = struct.pack("<HHIIHH", 0xFFFE if extensible else tag, channels, rate, rate * block,
                      block, bits)
    if extensible:
        guid = struct.pack("<H", tag) + b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"
        fmt += struct.pack("<HHI", 22, bits, 0) + guid
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"LIST" + struct.pack("<I", 4) + b"INFO"  # a chunk to skip
    body += b"data" + struct.pack("<I", len(data)) + data
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    return path


def read_all(path: Path) -> np.ndarray:
    reader = WavReader(path)
    return np.concatenate(list(reader.blocks(1000)))


def dominant_hz(x: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return float(np.argmax(spectrum) * rate / len(x))


# --- reading WAV files ---------------------------------------------------------------------

@pytest.mark.parametrize("bits, encoding, extensible, tolerance", [
    (16, "pcm", False, 0.5),
    (8, "pcm", False, 128.0),  # 8-bit keeps 1/256 of the int16 resolution
    (24, "pcm", False, 0.01),
    (32, "pcm", False, 0.01),
    (32, "float", False, 0.01),
    (64, "float", False, 0.01),
    (24, "pcm", True, 0.01),
    (32, "float", True, 0.01),
])
def test_reads_pcm_and_float_wavs(tmp_path, bits, encoding, extensible, tolerance) -> None:
    stereo = np.stack([tone(440, 22050, 0.3), -tone(440, 22050, 0.3) / 2], axis=1)
    path = write_wav(tmp_path / "x.wav", stereo, 22050, bits=bits, encoding=encoding,
                     extensible=extensible)
    reader = WavReader(path)
    assert (reader.format.sample_rate, reader.format.channels) == (22050, 2)
    assert reader.format.encoding == encoding and reader.format.bits == bits
    got = np.concatenate(list(reader.blocks(1000)))
    assert got.shape == stereo.shape
    assert np.max(np.abs(got - stereo)) <= tolerance


def test_stdlib_wave_files_read_the_same(tmp_path) -> None:
    x = np.round(tone(300, 8000, 0.2)).astype("<i2")
    with wave.open(str(tmp_path / "w.wav"), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(x.tobytes())
    assert np.array_equal(read_all(tmp_path / "w.wav")[:, 0], x.astype(np.float64))


@pytest.mark.parametrize("content, expected", [
    (b"just some words\n", "not a WAV file"),
    (b"RIFF\x00\x00\x00\x00WAVE", "without a data chunk"),
    (b"RIFF\x00\x00\x00\x00WAVEfmt \x04\x00\x00\x00\x01\x00\x01\x00", "truncated"),
])
def test_not_a_wav_is_one_usage_error(tmp_path, content, expected) -> None:
    path = tmp_path / "bad.wav"
    path.write_bytes(content)
    with pytest.raises(UsageError, match=expected) as err:
        WavReader(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_compressed_wav_names_its_encoding(tmp_path) -> None:
    path = write_wav(tmp_path / "x.wav", tone(440, 8000, 0.1), 8000)
    raw = bytearray(path.read_bytes())
    raw[20:22] = struct.pack("<H", 7)  # mu-law
    path.write_bytes(bytes(raw))
    with pytest.raises(UsageError, match="unsupported WAV encoding .mu-law."):
        WavReader(path)


def test_wav_read_in_blocks_stops_at_the_data_chunk(tmp_path) -> None:
    path = write_wav(tmp_path / "x.wav", tone(440, 16000, 0.25), 16000)
    path.write_bytes(path.read_bytes() + b"LIST\x04\x00\x00\x00junk")  # trailing metadata
    blocks = list(WavReader(path).blocks(1000))
    assert [len(b) for b in blocks] == [1000, 1000, 1000, 1000]


# --- downmix, resampling, chunking --------------------------------------------------------

def test_downmix_averages_channels() -> None:
    left = tone(440, 16000, 0.1)
    assert np.allclose(downmix(np.stack([left, -left], axis=1)), 0)
    assert np.allclose(downmix(np.stack([left, left], axis=1)), left)
    assert downmix(left) is left


def test_wav_to_16k_pcm_blocks(tmp_path) -> None:
    stereo = np.stack([tone(440, 44100, 1.0)] * 2, axis=1)
    path = write_wav(tmp_path / "x.wav", stereo, 44100, bits=24, extensible=True)
    pcm = b"".join(wav_pcm_blocks(WavReader(path)))
    x = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    assert abs(len(x) - RATE) <= 2 and abs(dominant_hz(x, RATE) - 440) <= 2


def test_rechunk_gives_exact_chunks_of_whole_samples() -> None:
    blocks = [b"\x01" * 7, b"\x02" * 500, b"", b"\x03" * 94]  # 601 bytes
    chunks = list(rechunk(blocks, 200))
    assert [len(c) for c in chunks] == [200, 200, 200]  # the odd last byte is no sample
    assert b"".join(chunks) == (b"\x01" * 7 + b"\x02" * 500 + b"\x03" * 94)[:600]


def test_paced_passes_chunks_through_unchanged() -> None:
    chunks = [bytes([i]) * 320 for i in range(5)]
    assert list(paced(chunks, None)) == chunks
    assert list(paced(chunks, 1000.0)) == chunks


# --- the recogniser ------------------------------------------------------------------------

def test_silence_and_noise_give_no_updates(tmp_path) -> None:
    pytest.importorskip("pocketsphinx")
    quiet = np.random.default_rng(0).normal(0, 3, 3 * RATE)
    source = open_audio(str(write_wav(tmp_path / "q.wav", quiet, RATE)))
    assert list(source.events(None)) == []


def synthesize(path: Path, sentences: list[str], gap_s: float = 1.2) -> Path:
    """Each sentence spoken by espeak-ng, with silence between (one utterance each)."""
    parts, rate = [], 0
    for i, text in enumerate(sentences):
        part = path.with_name(f"part{i}.wav")
        subprocess.run([ESPEAK, "-w", str(part), text], check=True, capture_output=True,
                       timeout=60)
        with wave.open(str(part)) as w:
            rate = w.getframerate()
            parts.append(np.frombuffer(w.readframes(w.getnframes()), dtype="<i2"))
        parts.append(np.zeros(int(rate * gap_s), dtype="<i2"))
    # espeak-ng writes 22050 Hz: the client has to resample it
    return write_wav(path, np.concatenate(parts).astype(np.float64), rate)


@needs_espeak
def test_speech_gives_partials_and_one_final_per_utterance(tmp_path) -> None:
    pytest.importorskip("pocketsphinx")
    source = open_audio(str(synthesize(tmp_path / "talk.wav", SENTENCES)))
    events = list(source.events(None))
    finals = [e for e in events if e["type"] == "final"]
    assert finals and any(e["type"] == "partial" for e in events)
    # segments count up, each closed by its final, and every update has text
    assert [e["segment"] for e in finals] == list(range(len(finals)))
    assert all(e["text"].strip() for e in events)
    assert all(e["text"].endswith(".") for e in finals)
    for e in events:
        assert e["segment"] <= len(finals) - 1
    # loosely what was said: some of its longer words come through
    said = {w.strip(".,").lower() for s in SENTENCES for w in s.split() if len(w) > 4}
    heard = {w.strip(".").lower() for e in finals for w in e["text"].split()}
    assert said & heard, (said, heard)



@needs_espeak
def test_audio_ending_mid_word_still_gets_its_final(tmp_path) -> None:
    """The endpointer never hears the pause: the end of the input closes the utterance."""
    pytest.importorskip("pocketsphinx")
    talk = synthesize(tmp_path / "talk.wav", SENTENCES[:1], gap_s=0.0)
    full, rate = read_all(talk)[:, 0], WavReader(talk).format.sample_rate
    cut = write_wav(tmp_path / "cut.wav", full[: len(full) * 7 // 10], rate)
    events = list(open_audio(str(cut)).events(None))
    assert [e["type"] for e in events].count("final") == 1
    assert events[-1]["type"] == "final" and events[-1]["text"].strip(".")

@needs_espeak
def test_caption_audio_file_end_to_end(live_server, tmp_path) -> None:
    """The server's Whisper recognises the speech; the terminal shows each recognised
    source above its translations."""
    wav = synthesize(tmp_path / "talk.wav", SENTENCES)
    proc = subprocess.run([LIVETRANS, "caption", "--audio", str(wav), "--fast",
                           "--target-lang", "de,ja", "--json", "--server", live_server.url],
                          capture_output=True, text=True, timeout=600, env=_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    stats = json.loads(proc.stdout)  # --json: the statistics are all of stdout
    lines = proc.stderr.strip().splitlines()  # ... and the captions are on stderr
    assert stats["finals"] == 2 * len(SENTENCES) and stats["errors"] == 0
    # the speech is the server's to recognise: finals are timed from the speech's ends
    assert stats["speech_end_to_caption_ms_p50"] > 0
    assert "final_to_caption_ms_p50" not in stats
    sources = [line.split("] en: ", 1)[1] for line in lines if "] en: " in line]
    assert len(sources) == len(SENTENCES)
    # espeak's default voice at its default rate: Whisper base mishears some words (here
    # 4 of 9 in one sentence); `livetrans bench speech` measures WER, this checks the wiring
    for ref, heard in zip(SENTENCES, sources, strict=True):
        assert wer(ref, heard) <= 0.5, heard
    for seg in range(len(SENTENCES)):
        assert any(line.startswith(f"[{seg}] de: ") for line in lines)
        assert any(line.startswith(f"[{seg}] ja: ") for line in lines)


@needs_espeak
def test_caption_audio_with_the_embedded_pocketsphinx(live_server, tmp_path) -> None:
    pytest.importorskip("pocketsphinx")
    wav = synthesize(tmp_path / "talk.wav", SENTENCES)
    proc = subprocess.run([LIVETRANS, "caption", "--audio", str(wav), "--asr", "pocketsphinx",
                           "--fast", "--quiet", "--json", "--server", live_server.url],
                          capture_output=True, text=True, timeout=600, env=_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    stats = json.loads(proc.stdout.strip().splitlines()[-1])
    assert stats["finals"] >= 1 and stats["errors"] == 0
    assert stats["captions"] >= stats["finals"]


@needs_espeak
def test_caption_audio_pcm_on_stdin(live_server, tmp_path) -> None:
    wav = synthesize(tmp_path / "talk.wav", SENTENCES[:1])
    pcm = b"".join(wav_pcm_blocks(WavReader(wav)))
    proc = subprocess.run([LIVETRANS, "caption", "--audio", "-", "--quiet", "--json",
                           "--server", live_server.url], input=pcm, capture_output=True,
                          timeout=600, env=_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    stats = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    assert stats["finals"] == 1 and stats["errors"] == 0


# --- user mistakes: one line on stderr, exit code 2 ---------------------------------------

def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIVETRANS_")}
    env.update(extra)
    return env


def _one_line_error(args: list[str], *expected: str, **env: str) -> None:
    proc = subprocess.run([LIVETRANS, "caption", *args], capture_output=True, text=True,
                          timeout=120, env=_env(**env))
    assert_one_line_error(proc, *expected)


def test_audio_mistakes_are_one_line(tmp_path) -> None:
    # nothing listens on the server address: each mistake is found before connecting
    (tmp_path / "notes.wav").write_text("not audio at all\n")
    _one_line_error(["--audio", "/no/such/talk.wav"], "--audio", "/no/such/talk.wav")
    _one_line_error(["--audio", str(tmp_path / "notes.wav")], "notes.wav", "not a WAV")
    wav = write_wav(tmp_path / "x.wav", tone(440, RATE, 0.1), RATE)
    _one_line_error(["--audio", str(wav), "--speed", "0"], "--speed")


def test_missing_pocketsphinx_is_one_line_from_the_cli(tmp_path) -> None:
    # a package that fails to import shadows the installed one
    shadow = tmp_path / "shadow" / "pocketsphinx"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('pocketsphinx is not here')\n")
    wav = write_wav(tmp_path / "x.wav", tone(440, RATE, 0.1), RATE)
    for source in (str(wav), "-"):
        _one_line_error(["--audio", source, "--asr", "pocketsphinx"], "PocketSphinx",
                        "livetrans[audio]",
                        PYTHONPATH=str(tmp_path / "shadow"))

