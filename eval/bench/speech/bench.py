"""Whisper base (the server's recogniser) and PocketSphinx (the caption client's) side by
side, on the same espeak-ng speech: word error rate and end-of-speech-to-final latency.

    livetrans bench speech --flores-dir DIR --acl-dir DIR --sentences 10 --out results/sb

For each dataset (FLORES-200 dev, ACL 60/60 dev: the first N English sentences) espeak-ng
(US English, 150 words a minute) says every sentence; the speech, trimmed of espeak's own
leading and trailing silence, is laid end to end with 1 s of silence after each sentence,
so where every sentence ends in the audio is known. Each recogniser hears that talk in
100 ms chunks (``--chunk-ms``): Whisper as the server runs it (``StreamingWhisper``, its
defaults), PocketSphinx as ``livetrans caption --asr pocketsphinx`` does
(``app.speech.pocketsphinx.PocketSphinxStream``); a fresh stream per talk, one Whisper
model for all.

Latency runs on a *virtual real-time clock* rather than the wall clock, so it is what a
live speaker would see, yet needs no sleeping and no quiet machine: chunk i becomes
available when its audio has been spoken, ``(i + 1) * 100 ms``; the recogniser is busy for
the measured compute time of each ``feed`` call, so ``clock = max(clock, available) +
compute``. A final emitted by a call is out at the clock after it. A recogniser slower than
real time falls behind, and its latencies grow, as they would live. The table splits each
latency's median: the *audio wait* is the silence the recogniser heard after the sentence
before it let the final out (its endpointing); the rest is compute and the queue behind it.

Finals are tied to sentences by *when* they came: a final belongs to the sentence whose
audio was being heard when it was emitted; one that came in the first half second of the
next sentence (``SLACK_S``) still belongs to the sentence before, since a final is decided
a little after the end of speech and no segment of the next sentence can end that early.
A sentence with several finals was **split** (its latency is that of its last one); one
with none was **merged** into a later final (or missed): its latency is that of the next
final. Word error rate is over the joined finals against the joined references
(``eval.metrics.wer``: both normalised alike, lower case, no punctuation, numbers as
written), so splits and merges cost only their words. The real-time factor is compute
seconds over audio seconds.

Then, side by side on one server (``--speakers 0,1,4``, ``eval.bench.speech.cost``), what audio
speakers cost the translation engine: a text speaker replaying recorded ASR updates
(``--asr-file``) in real time beside 0, 1 and 4 audio speakers streaming the first
dataset's talk in real time; its final latency, the audio speakers' end of speech to final
caption (wall clock: recognition, its turn on the recogniser's thread, translation), their
WER and the recogniser's real-time factor, and where the speech end to final caption time
goes (``eval.bench.speech.breakdown``: endpoint silence, waiting on the recogniser's thread,
the final's decode, its translation, the rest). That part runs in real time: a quiet machine.

Writes ``speech_bench.json`` (every sentence's reference, hypothesis, latency),
``speech_cost.json`` and ``speech_bench.md``; tables go to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import bisect
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from tqdm import tqdm

from app.speech.model_files import SpeechModelError
from app.speech.pocketsphinx import PocketSphinxStream, load_pocketsphinx
from app.speech.resample import RATE, to_pcm16
from app.speech.whisper_stream import StreamingWhisper, load_whisper
from app.usage import PlainHelp, UsageError, comma_list, positive_int
from eval.bench.speech.breakdown import breakdown_table
from eval.bench.speech.cost import cost_run, cost_table, espeak, versus_table
from eval.datasets.acl6060 import read_acl
from eval.datasets.flores import read_flores
from eval.metrics.speed import percentile
from eval.metrics.wer import WordErrorRate, sentence_wer
from eval.tables import Block, Table, markdown, show

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
# whisper: as the server runs it (encoder window fitted to the buffer); whisper-full: the
# 30 s window faster-whisper pads to, the baseline of the fitted window
RECOGNIZERS = ("whisper", "whisper-full", "pocketsphinx")
DATASETS = ("flores", "acl")
LEAD_S = 0.5  # silence before the first sentence (an endpointer wants some to start from)
PAUSE_S = 1.0  # silence after every sentence
SLACK_S = 0.5  # a final this far into the next sentence still belongs to the last one
SILENT = 64.0  # |sample| (int16 scale) below which espeak's output counts as silence
EXAMPLES = 2  # sentences per dataset shown in the markdown


@dataclass
class Talk:
    """One dataset's sentences spoken end to end: 16 kHz samples on the int16 scale, and
    each sentence's start and end of speech (s)."""

    dataset: str
    sentences: list[str]
    pcm: np.ndarray
    starts_s: list[float] = field(default_factory=list)
    ends_s: list[float] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return len(self.pcm) / RATE


def trim_silence(samples: np.ndarray) -> np.ndarray:
    """``samples`` without their silent head and tail, so a sentence ends where its
    speech does (espeak pads its output a little)."""
    loud = np.flatnonzero(np.abs(samples) >= SILENT)
    return samples[loud[0]:loud[-1] + 1] if len(loud) else samples[:0]


def compose(dataset: str, sentences: list[str]) -> Talk:
    """The talk of ``sentences``: lead silence, then each sentence and a pause."""
    talk = Talk(dataset, sentences, np.zeros(0))
    parts, at = [np.zeros(int(LEAD_S * RATE))], LEAD_S
    with tempfile.TemporaryDirectory() as tmp:
        for text in sentences:
            speech = trim_silence(espeak(text, Path(tmp)))
            talk.starts_s.append(at)
            at += len(speech) / RATE
            talk.ends_s.append(at)
            parts += [speech, np.zeros(int(PAUSE_S * RATE))]
            at += PAUSE_S
    talk.pcm = np.concatenate(parts)
    return talk


class Stream(Protocol):
    """One recogniser's stream over one talk: chunks in, the texts of its finals out."""

    def feed(self, samples: np.ndarray) -> list[str]: ...

    def finish(self) -> list[str]: ...


class WhisperStream:
    """``StreamingWhisper`` as the server runs it (its defaults, or another encoder
    ``window``), on a shared model."""

    def __init__(self, model: Any, window: str = "fit") -> None:
        self.stream = StreamingWhisper(model=model, window=window)

    def feed(self, samples: np.ndarray) -> list[str]:
        return self._finals(self.stream.feed((samples / 32768.0).astype(np.float32)))

    def finish(self) -> list[str]:
        return self._finals(self.stream.flush())

    @staticmethod
    def _finals(events: list[Any]) -> list[str]:
        return [e.text for e in events if e.kind == "final"]


class SphinxStream:
    """The caption client's embedded PocketSphinx (its endpointer and default model)."""

    def __init__(self, pocketsphinx: Any) -> None:
        self.recognizer = PocketSphinxStream(pocketsphinx)

    def feed(self, samples: np.ndarray) -> list[str]:
        return self._finals(self.recognizer.feed(to_pcm16(samples)))

    def finish(self) -> list[str]:
        return self._finals(self.recognizer.finish())

    @staticmethod
    def _finals(events: list[dict]) -> list[str]:
        return [e["text"] for e in events if e["type"] == "final"]


class VirtualClock:
    """Real time as a live recogniser would see it: audio arrives at its own pace and the
    recogniser is busy for as long as each call took."""

    def __init__(self) -> None:
        self.now = 0.0

    def advance(self, available_s: float, compute_s: float) -> float:
        """A call on audio available at ``available_s`` that took ``compute_s``; returns
        when it was done."""
        self.now = max(self.now, available_s) + compute_s
        return self.now


@dataclass(frozen=True)
class Final:
    text: str
    heard_s: float  # audio fed when it was emitted
    out_s: float  # virtual time it was emitted


@dataclass
class Replay:
    finals: list[Final]
    compute_s: float


def replay(stream: Stream, talk: Talk, chunk_s: float, bar: tqdm | None = None) -> Replay:
    """Feed ``talk`` to ``stream`` in ``chunk_s`` chunks on the virtual clock."""
    clock, finals, compute = VirtualClock(), [], 0.0
    step, size = int(chunk_s * RATE), len(talk.pcm)
    for start in [*range(0, size, step), size]:  # the last call ends the stream
        heard = min(start + step, size) / RATE
        began = time.perf_counter()
        texts = stream.feed(talk.pcm[start:start + step]) if start < size else stream.finish()
        took = time.perf_counter() - began
        compute += took
        out = clock.advance(heard, took)
        finals += [Final(text, heard, out) for text in texts if text.strip()]
        if bar is not None:
            bar.update(min(start + step, size) - start)  # samples
    return Replay(finals, compute)


def assign(finals: list[Final], talk: Talk) -> list[list[Final]]:
    """Each sentence's own finals: those emitted while its audio (or the first ``SLACK_S``
    of the next sentence's) was being heard."""
    bounds = [start + SLACK_S for start in talk.starts_s[1:]]
    own: list[list[Final]] = [[] for _ in talk.sentences]
    for final in finals:
        own[bisect.bisect_right(bounds, final.heard_s)].append(final)
    return own


def closing_finals(own: list[list[Final]]) -> list[Final | None]:
    """The final that closes each sentence: its last own final, else (merged or missed)
    the next final of a later sentence; None when no final came after it."""
    out: list[Final | None] = []
    for k, finals in enumerate(own):
        later = next((f[0] for f in own[k + 1:] if f), None)
        out.append(finals[-1] if finals else later)
    return out


def summarise(name: str, talk: Talk, run: Replay) -> dict[str, Any]:
    """One recogniser on one talk: the row of the table, and every sentence for the JSON."""
    own = assign(run.finals, talk)
    closing = closing_finals(own)
    lat = [None if f is None else f.out_s - end for f, end in zip(closing, talk.ends_s,
                                                                   strict=True)]
    # the part of the latency spent hearing silence (the endpointer's wait); the rest
    # is compute and the queue behind it
    wait = [f.heard_s - end for f, end in zip(closing, talk.ends_s, strict=True) if f]
    timed = [x for x in lat if x is not None]
    metric = WordErrorRate()
    texts = [f.text for f in run.finals]
    return {
        "recognizer": name, "dataset": talk.dataset, "sentences": len(talk.sentences),
        "finals": len(run.finals),
        "split_sentences": sum(len(f) > 1 for f in own),
        "merged_sentences": sum(not f for f in own),
        "wer": round(metric.corpus_score(talk.sentences, texts).score, 4),
        "wer_counts": metric.counts(talk.sentences, texts),
        "wer_signature": metric.signature,
        "final_latency_s_p50": _round(percentile(timed, 50)),
        "final_latency_s_p90": _round(percentile(timed, 90)),
        "audio_wait_s_p50": _round(percentile(wait, 50)),
        "real_time_factor": round(run.compute_s / talk.seconds, 3),
        "compute_s": round(run.compute_s, 2), "audio_s": round(talk.seconds, 2),
        "per_sentence": [_sentence(ref, f, x, end) for ref, f, x, end in zip(
            talk.sentences, own, lat, talk.ends_s, strict=True)],
    }


def _sentence(reference: str, own: list[Final], latency: float | None,
              end_s: float) -> dict[str, Any]:
    hypothesis = " ".join(f.text for f in own)
    return {"reference": reference, "hypothesis": hypothesis, "finals": len(own),
            "wer": _round(sentence_wer(reference, hypothesis), 3),
            "end_s": round(end_s, 2), "latency_s": _round(latency),
            "finals_heard_s": [round(f.heard_s, 2) for f in own],
            "finals_out_s": [round(f.out_s, 2) for f in own]}


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def results_table(summaries: list[dict[str, Any]]) -> Table:
    t = Table(["dataset", "recogniser", "WER", "final latency p50 s", "p90 s",
               "of which audio wait p50 s", "real-time factor", "sentences → finals",
               "split", "merged"],
              title="Speech recognition: espeak-ng speech, virtual real-time clock")
    for s in summaries:
        t.add(s["dataset"], s["recognizer"], f"{s['wer']:.3f}",
              _cell(s["final_latency_s_p50"]), _cell(s["final_latency_s_p90"]),
              _cell(s["audio_wait_s_p50"]), f"{s['real_time_factor']:.3f}",
              f"{s['sentences']} → {s['finals']}",
              s["split_sentences"], s["merged_sentences"])
    return t


def examples_table(summaries: list[dict[str, Any]]) -> Table:
    """The first sentences of each dataset as every recogniser heard them."""
    names = list(dict.fromkeys(s["recognizer"] for s in summaries))
    t = Table(["dataset", "reference", *names], title="Examples (reference, finals)")
    for dataset in dict.fromkeys(s["dataset"] for s in summaries):
        rows = {s["recognizer"]: s["per_sentence"] for s in summaries
                if s["dataset"] == dataset}
        for i in range(min(EXAMPLES, *(len(r) for r in rows.values()))):
            t.add(dataset, rows[names[0]][i]["reference"],
                  *(rows[n][i]["hypothesis"] or "(nothing)" for n in names))
    return t


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def window_fallbacks(stream: Any) -> int | None:
    """Decodes a fitted Whisper window looped on and the full window redid (None: not a
    fitted-window Whisper stream)."""
    transcriber = getattr(getattr(stream, "stream", None), "transcriber", None)
    return getattr(transcriber, "fallbacks", None)


def _read(dataset: str, args: argparse.Namespace) -> list[str]:
    if dataset == "flores":
        return read_flores(args.flores_dir, "dev", "en")[: args.sentences]
    return read_acl(args.acl_dir, "dev", "en")[: args.sentences]


def _streams(names: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """A factory of fresh streams per recogniser; models load here, once."""
    factories: dict[str, Any] = {}
    if "whisper" in names or "whisper-full" in names:
        model = _whisper_model(args.asr_model, args.asr_threads)
        factories["whisper"] = lambda: WhisperStream(model)
        factories["whisper-full"] = lambda: WhisperStream(model, window="full")
    if "pocketsphinx" in names:
        ps = load_pocketsphinx()
        factories["pocketsphinx"] = lambda: SphinxStream(ps)
    return factories


def _whisper_model(folder: Path | None, threads: int) -> Any:
    """Whisper base (or ``folder``), warmed by one decode so the first sentence is not
    charged for CTranslate2's first-call setup."""
    try:
        model = load_whisper(folder, threads)
    except ImportError as exc:  # faster-whisper is in the speech extra
        raise UsageError(f"Whisper needs faster-whisper: pip install 'livetrans[speech]' "
                         f"({exc})") from None
    except SpeechModelError as exc:
        raise UsageError(str(exc)) from None
    segments, _ = model.transcribe(np.zeros(RATE, dtype=np.float32), language="en",
                                   beam_size=1)
    list(segments)
    return model


# ``--versus``: a feature of the server and the setting that turns it off
VERSUS = {"core-loans": "no_core_loans", "pause-translation": "no_pause_translation"}


def without_name(feature: str) -> str:
    """The name of the ``--versus`` server without ``feature`` ("no core loans")."""
    return f"no {feature.replace('-', ' ')}"


def engine_cost(talk: Talk, speakers: list[int], args: argparse.Namespace) -> list[dict]:
    """One server; per entry of ``speakers``, a text speaker beside that many audio
    speakers streaming ``talk`` (``eval.bench.speech.cost.cost_run``), in one run."""
    from eval.datasets.aligned import DatasetNotFoundError
    from eval.datasets.asr_partials import read_asr_streams
    from eval.local_server import LocalServer

    if min(speakers) < 0:
        raise UsageError("--speakers takes whole numbers >= 0")
    try:
        utterances = read_asr_streams(args.asr_file, len(talk.sentences))
    except DatasetNotFoundError as exc:
        raise UsageError(str(exc)) from None
    wer = WordErrorRate()
    servers: list[tuple[str, dict[str, bool]]] = [("default", {})]
    if args.versus is not None:
        servers.append((without_name(args.versus), {VERSUS[args.versus]: True}))
    out = []
    for round_ in range(1, args.rounds + 1):
        for server_name, without in servers:  # in turns, round by round
            with LocalServer(model=args.model, n_threads=args.n_threads,
                             asr_model=args.asr_model and str(args.asr_model),
                             asr_threads=args.asr_threads, asr_window=args.asr_window,
                             max_live_sessions=max(speakers) + 2, max_queue_wait_s=3600,
                             max_audio_speakers=max(1, max(speakers)),
                             log_level="warning", **without) as server:
                for n in speakers:
                    print(f"engine cost ({server_name}, round {round_}): 1 text speaker + "
                          f"{n} audio speakers ({talk.seconds:.0f} s of speech each)...",
                          file=sys.stderr, flush=True)
                    run = cost_run(server, talk, utterances, n)
                    out.append(run.summary(lambda sources: wer.corpus_score(
                        [" ".join(talk.sentences)], [" ".join(sources)]).score)
                        | {"server": server_name, "round": round_})
    return out


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="livetrans bench speech", description=__doc__,
                                 formatter_class=PlainHelp)
    ap.add_argument("--flores-dir", "--flores", type=Path, metavar="DIR",
                    default=SAMPLES / "flores_layout",
                    help="FLORES-200 folder holding dev/ (default: the sentences shipped in "
                         "eval/samples/flores_layout; see README 'Evaluation data')")
    ap.add_argument("--acl-dir", "--acl", type=Path, metavar="DIR",
                    default=SAMPLES / "acl6060_layout",
                    help="ACL 60/60 folder holding dev/ with en.txt (default: the "
                         "sentences shipped in eval/samples/acl6060_layout)")
    ap.add_argument("--datasets", default=",".join(DATASETS),
                    type=comma_list(choices=DATASETS),
                    help="comma-separated datasets to speak: flores, acl")
    ap.add_argument("--sentences", type=positive_int, default=10, metavar="N",
                    help="first English sentences of each dataset's dev split")
    ap.add_argument("--recognizers", default="whisper,pocketsphinx",
                    type=comma_list(choices=RECOGNIZERS),
                    help="comma-separated recognisers: whisper (as served), whisper-full "
                         "(its 30 s encoder window, the baseline of the fitted one), "
                         "pocketsphinx")
    ap.add_argument("--asr-window", choices=("fit", "full"), default="fit",
                    help="the server's Whisper encoder window in the --speakers runs (as "
                         "serve --asr-window)")
    ap.add_argument("--asr-threads", type=positive_int, default=1,
                    help="CPU threads of Whisper's decodes (as serve --asr-threads); "
                         "PocketSphinx uses one")
    ap.add_argument("--asr-model", type=Path, default=None, metavar="DIR",
                    help="CTranslate2 Whisper folder (default: the bundled Whisper base)")
    ap.add_argument("--chunk-ms", type=positive_int, default=100,
                    help="audio per feed call, in milliseconds (a microphone's frame)")
    ap.add_argument("--speakers", default="0,1,4", type=comma_list(int, "a whole number"),
                    help="audio speakers beside one text speaker on one server, one run "
                         "each, side by side ('' skips this part; it runs in real time)")
    ap.add_argument("--versus", choices=sorted(VERSUS), default=None,
                    help="run every --speakers count on a second server with this feature "
                         "off too (core-loans: serve --no-core-loans, the engine on all its "
                         "threads while Whisper decodes; pause-translation: serve "
                         "--no-pause-translation, a pause's partial translated as any "
                         "partial), in turns, and print the ratios")
    ap.add_argument("--versus-no-core-loans", dest="versus", action="store_const",
                    const="core-loans", help="the same as --versus core-loans")
    ap.add_argument("--rounds", type=positive_int, default=1, metavar="N",
                    help="repeat the --speakers runs N times (with --versus: both servers "
                         "in turns each round)")
    ap.add_argument("--asr-file", type=Path, default=SAMPLES / "asr_sample_en.jsonl",
                    metavar="JSONL",
                    help="the text speaker's recorded ASR updates (default: the shipped "
                         "sample); as many utterances as --sentences")
    ap.add_argument("--model", default=None,
                    help="GGUF the server translates with (default: the bundled Gemma 3 "
                         "270M)")
    ap.add_argument("--n-threads", "--threads", dest="n_threads", type=positive_int,
                    default=None, help="the server's llama.cpp threads (default: all cores)")
    ap.add_argument("--out", type=Path, default=Path("results/speech-bench"),
                    metavar="DIR",
                    help="folder for speech_bench.json and speech_bench.md")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    names = [n.strip() for n in args.recognizers.split(",") if n.strip()]
    datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    if not names or not datasets:
        raise UsageError("name at least one recogniser and one dataset")
    texts = {d: _read(d, args) for d in datasets}  # a wrong folder fails before any work
    if shutil.which("espeak-ng") is None:
        raise UsageError("speech-bench speaks its sentences with espeak-ng, which is not "
                         "installed (Debian: apt-get install espeak-ng)")
    talks = [compose(d, sentences) for d, sentences in texts.items()]
    streams = _streams(names, args)
    summaries = []
    total = sum(len(t.pcm) for t in talks) * len(names)
    with tqdm(total=total, unit_scale=1 / RATE, desc="audio", file=sys.stderr,
              bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} s audio [{elapsed}<{remaining}]"
              ) as bar:
        for talk in talks:
            for name in names:
                bar.set_description(f"{name} {talk.dataset}")
                stream = streams[name]()
                run = replay(stream, talk, args.chunk_ms / 1000, bar)
                summaries.append(summarise(name, talk, run) | {
                    "asr_threads": args.asr_threads, "chunk_ms": args.chunk_ms,
                    "window_fallbacks": window_fallbacks(stream)})
    blocks: list[Block] = [results_table(summaries), examples_table(summaries),
                           f"WER: {WordErrorRate().signature}"]
    show(blocks)
    args.out.mkdir(parents=True, exist_ok=True)
    speakers = [int(n) for n in args.speakers.split(",") if n.strip()]
    if speakers:
        costs = engine_cost(talks[0], speakers, args)
        (args.out / "speech_cost.json").write_text(json.dumps(costs, indent=1) + "\n")
        cost = ["\n## What audio speakers cost the translation engine (wall clock)",
                cost_table(costs), breakdown_table(costs)]
        if args.versus is not None:
            cost += [versus_table(costs, args.versus, without_name(args.versus))]
        show(cost)
        blocks += cost
    (args.out / "speech_bench.json").write_text(
        json.dumps(summaries, indent=1, ensure_ascii=False) + "\n")
    (args.out / "speech_bench.md").write_text(markdown(blocks) + "\n")
    print(f"wrote {args.out / 'speech_bench.json'} and {args.out / 'speech_bench.md'}",
          file=sys.stderr)
    return 0
