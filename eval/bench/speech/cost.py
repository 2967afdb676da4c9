"""What audio speakers cost the translation engine: 0, 1 and 4 speakers side by side.

Part of ``livetrans bench speech`` (``--speakers``). One in-process server
(``eval.local_server.LocalServer``). In every run a *text speaker*
replays a recorded ASR stream (``asr_partials``: timed partials and finals) in real time,
as a text client does; beside it, N *audio speakers* each stream the same espeak-ng talk
(FLORES dev sentences, 1 s pauses) as 16 kHz PCM in real time (200 ms frames), recognised
by the server's Whisper. The runs differ only in N, so what N costs shows as:

* the text speaker's final latency (final sent to its caption, p50 / p95) and how many of
  its partials were still translated (the rest were coalesced away under load);
* the audio speakers' end of speech to final caption (p50 / p90 / p95: recognition, its queue
  on the recogniser's one thread, translation), their word error rate, and audio dropped;
* where that time goes (``eval.bench.speech.breakdown``, from the final captions'
  ``stats.speech``): endpoint silence, waiting on the recogniser's thread, the final's
  decode, its translation, and the rest;
* the recogniser's compute per second of audio (its real-time factor on ``--asr-threads``).

An audio speaker sends each 200 ms frame once its audio has been spoken, as a microphone
does (before the breakdown, a frame left when its audio began: up to 0.2 s early).

The talk's sentence ends are known from the composition; each final caption is matched to
the earliest sentence that ended before it arrived and is not yet matched (a sentence that
Whisper splits in two counts once). Timings come from the wall clock on a quiet machine.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import wave
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from app.speech.resample import RATE, Resampler
from clients.live_session import LiveSession, LiveSessionRefused
from eval.bench.speech.breakdown import breakdown, final_parts
from eval.datasets.streams import Stream
from eval.tables import Table

FRAME_S = 0.2  # an audio speaker's frame, sent in real time


def espeak(text: str, folder: Path) -> np.ndarray:
    """``text`` spoken by espeak-ng (US English, 150 words a minute) at 16 kHz."""
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise RuntimeError("espeak-ng is not installed (make system-deps)")
    path = folder / "say.wav"
    subprocess.run([exe, "-v", "en-us", "-s", "150", "-w", str(path), text], check=True,
                   capture_output=True, timeout=120)
    with wave.open(str(path)) as w:
        rate = w.getframerate()
        samples = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return Resampler(rate).process(samples.astype(np.float64))


@dataclass
class SpeakerLog:
    """One speaker's finals: latencies (s), recognised sources, errors."""

    latencies_s: list[float] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    captions: int = 0
    finals: int = 0
    errors: list[str] = field(default_factory=list)
    stats: list[dict] = field(default_factory=list)  # each final caption's ``stats``
    parts: list[dict] = field(default_factory=list)  # where each timed final's time went


def match_finals(arrivals: list[float], ends: list[float]) -> list[tuple[int, int]]:
    """(final caption, sentence) pairs: each final answers the earliest sentence that ended
    before it arrived and is not answered yet (none: it is not counted)."""
    pairs, next_end = [], 0
    for i, t in enumerate(arrivals):
        if next_end < len(ends) and ends[next_end] <= t:
            pairs.append((i, next_end))
            next_end += 1
    return pairs


def match_ends(arrivals: list[float], ends: list[float]) -> list[float]:
    """Latency of each final caption from the end of the sentence it answers."""
    return [arrivals[i] - ends[k] for i, k in match_finals(arrivals, ends)]


def timed_parts(arrivals: list[float], ends: list[float],
                stats: list[dict]) -> list[dict[str, float]]:
    """Where each timed final's latency went (``breakdown.final_parts``), for the finals
    whose caption says it."""
    parts = [final_parts(ends[k], arrivals[i] - ends[k], stats[i])
             for i, k in match_finals(arrivals, ends)]
    return [p for p in parts if p is not None]


class Talk(Protocol):
    """Speech for the audio speakers (``eval.bench.speech.bench.compose`` makes one)."""

    pcm: np.ndarray  # 16 kHz samples on the int16 scale
    sentences: list[str]
    ends_s: list[float]  # where each sentence's speech ends


async def audio_speaker(url: str, talk: Talk, lang: str, log: SpeakerLog) -> None:
    """Stream the talk in real time; time each final caption from its sentence's end."""
    async with LiveSession(url, open_timeout=10) as live:
        try:
            await live.start(target_lang=lang, input="audio", sample_rate=RATE)
        except LiveSessionRefused as refused:
            raise RuntimeError(f"the server refused an audio speaker: {refused.frame}") from None
        arrivals: list[float] = []
        t0 = time.perf_counter()

        async def receive() -> None:
            async for msg in live.frames():
                if msg["type"] == "caption":
                    log.captions += 1
                    if msg["final"]:
                        log.finals += 1
                        arrivals.append(time.perf_counter() - t0)
                        log.sources.append(msg["source"])
                        log.stats.append(msg.get("stats") or {})
                elif msg["type"] == "error":
                    log.errors.append(msg.get("code", "error"))
                elif msg["type"] == "done":
                    return

        receiver = asyncio.create_task(receive())
        step = int(FRAME_S * RATE)
        pcm = np.clip(np.round(talk.pcm), -32768, 32767).astype("<i2")
        for i in range(0, len(pcm), step):
            frame = pcm[i:i + step]  # sent once spoken, as from a microphone
            await asyncio.sleep(max(0.0, t0 + (i + len(frame)) / RATE - time.perf_counter()))
            await live.send_audio(frame.tobytes())
        await live.stop()
        await receiver
    log.latencies_s = match_ends(arrivals, talk.ends_s)
    log.parts = timed_parts(arrivals, talk.ends_s, log.stats)


async def text_speaker(url: str, utterances: list[Stream], lang: str, log: SpeakerLog) -> None:
    """Replay recorded ASR updates at their own pace; time each final to its caption."""
    async with LiveSession(url, open_timeout=10) as live:
        await live.send({"type": "start", "target_lang": lang})
        await live.recv()
        sent: dict[int, float] = {}

        async def receive() -> None:
            async for msg in live.frames():
                if msg["type"] == "caption":
                    log.captions += 1
                    if msg["final"]:
                        log.finals += 1
                        log.latencies_s.append(time.perf_counter() - sent[msg["segment"]])
                elif msg["type"] == "error":
                    log.errors.append(msg.get("code", "error"))
                elif msg["type"] == "done":
                    return

        receiver = asyncio.create_task(receive())
        for seg, utterance in enumerate(utterances):
            begun = time.perf_counter()
            for update in utterance.updates:
                await asyncio.sleep(max(0.0, begun + (update.t or 0.0) - time.perf_counter()))
                if update.is_final:
                    sent[seg] = time.perf_counter()
                await live.send_update("final" if update.is_final else "partial",
                                       update.source, segment=seg)
        await live.stop()
        await receiver


@dataclass
class CostRun:
    audio_speakers: int
    text: SpeakerLog
    audio: list[SpeakerLog]
    asr_compute_s: float
    asr_audio_s: float
    dropped_audio_s: float
    wall_s: float

    def summary(self, wer: Any) -> dict[str, Any]:
        audio_lat = [x for log in self.audio for x in log.latencies_s]
        sources = [log.sources for log in self.audio]
        return {
            "audio_speakers": self.audio_speakers,
            "text_final_latency_s_p50": _pct(self.text.latencies_s, 50),
            "text_final_latency_s_p95": _pct(self.text.latencies_s, 95),
            "text_captions": self.text.captions, "text_finals": self.text.finals,
            "text_errors": len(self.text.errors),
            "audio_end_of_speech_to_final_s_p50": _pct(audio_lat, 50),
            "audio_end_of_speech_to_final_s_p90": _pct(audio_lat, 90),
            "audio_end_of_speech_to_final_s_p95": _pct(audio_lat, 95),
            "audio_finals": sum(log.finals for log in self.audio),
            # finals that took the translation made at the pause before them (stats.pause)
            "audio_finals_from_pause": sum(st.get("pause") == "reused"
                                           for log in self.audio for st in log.stats),
            "audio_wer": None if not sources else round(
                float(np.mean([wer(s) for s in sources])), 3),
            "audio_errors": sum(len(log.errors) for log in self.audio),
            "asr_real_time_factor": round(self.asr_compute_s / self.asr_audio_s, 3)
            if self.asr_audio_s else None,
            "dropped_audio_s": round(self.dropped_audio_s, 1),
            "wall_s": round(self.wall_s, 1),
            "breakdown": breakdown([p for log in self.audio for p in log.parts]),
            "breakdown_finals": [{k: round(v, 3) for k, v in p.items()}
                                 for log in self.audio for p in log.parts],
        }


def _pct(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 2) if values else None


def _metric(server: Any, name: str) -> float:
    return server.state.metrics.registry.get_sample_value(name) or 0.0


def cost_run(server: Any, talk: Talk, utterances: list[Stream], speakers: int,
             lang: str = "de") -> CostRun:
    """One text speaker and ``speakers`` audio speakers at once, on ``server``."""
    url = server.url.replace("http://", "ws://") + "/v1/live"
    before = {name: _metric(server, name) for name in (
        "livetrans_asr_decode_seconds_sum", "livetrans_asr_audio_seconds_total",
        "livetrans_asr_dropped_audio_seconds_total")}
    text, audio = SpeakerLog(), [SpeakerLog() for _ in range(speakers)]

    async def everyone() -> None:
        await asyncio.gather(text_speaker(url, utterances, lang, text),
                             *(audio_speaker(url, talk, lang, log) for log in audio))

    began = time.perf_counter()
    asyncio.run(everyone())
    wall = time.perf_counter() - began
    after = {name: _metric(server, name) - value for name, value in before.items()}
    return CostRun(speakers, text, audio, after["livetrans_asr_decode_seconds_sum"],
                   after["livetrans_asr_audio_seconds_total"],
                   after["livetrans_asr_dropped_audio_seconds_total"], wall)


def cost_table(summaries: list[dict]) -> Table:
    named = any("server" in s for s in summaries)
    t = Table((["server", "round"] if named else []) + [
        "audio speakers", "text final p50 s", "text final p95 s", "text captions",
        "speech end→final p50 s", "p90 s", "p95 s", "audio finals (from the pause)",
        "audio WER", "ASR compute / audio s", "audio dropped s", "errors"])
    for s in summaries:
        t.add(*([s.get("server", "-"), s.get("round", "-")] if named else []),
              s["audio_speakers"], s["text_final_latency_s_p50"], s["text_final_latency_s_p95"],
              f"{s['text_captions']} ({s['text_finals']} finals)",
              s["audio_end_of_speech_to_final_s_p50"] or "-",
              s.get("audio_end_of_speech_to_final_s_p90") or "-",
              s["audio_end_of_speech_to_final_s_p95"] or "-",
              f"{s['audio_finals']} ({s.get('audio_finals_from_pause', 0)})",
              s["audio_wer"] if s["audio_wer"] is not None else "-",
              s["asr_real_time_factor"] or "-", s["dropped_audio_s"],
              s["text_errors"] + s["audio_errors"])
    return t


VERSUS_COLUMNS = (("text final p50 s", "text_final_latency_s_p50"),
                 ("text final p95 s", "text_final_latency_s_p95"),
                 ("speech end→final p50 s", "audio_end_of_speech_to_final_s_p50"),
                 ("p90 s", "audio_end_of_speech_to_final_s_p90"))


def versus_table(summaries: list[dict], feature: str, without_name: str,
                 with_name: str = "default") -> Table:
    """Per speaker count, the median over rounds of each latency on the server with
    ``feature`` (``with_name``) and on the one without it (``without_name``, e.g. started
    with ``--no-core-loans``), and their ratio (without / with: above 1, the feature
    helps)."""
    t = Table(["audio speakers", "rounds"] + [f"{name} with / without (ratio)"
                                              for name, _ in VERSUS_COLUMNS]
              + ["text captions with / without"],
              title=f"{feature} against none (medians over rounds; ratio = without / with)")
    for n in sorted({s["audio_speakers"] for s in summaries}):
        runs = {server: [s for s in summaries if s["audio_speakers"] == n
                         and s.get("server") == server]
                for server in (with_name, without_name)}
        with_, without = runs[with_name], runs[without_name]
        if not with_ or not without:
            continue
        cells = []
        for _, key in VERSUS_COLUMNS:
            a, b = _median(with_, key), _median(without, key)
            cells.append("-" if a is None or b is None else
                         f"{a:.2f} / {b:.2f} ({b / a:.2f}x)" if a else f"{a:.2f} / {b:.2f}")
        t.add(n, min(len(with_), len(without)), *cells,
              f"{_median(with_, 'text_captions'):.0f} / {_median(without, 'text_captions'):.0f}")
    return t


def _median(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return float(np.median(values)) if values else None
