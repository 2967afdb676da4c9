"""The interpreter benchmark's parts that need no server: the speakers' espeak-ng talks,
and how a session's timed events become per-sentence latencies.

Kept apart from ``eval.bench.interpreter.bench`` (the server and the SDK sessions) so the
attribution rules below can be tested on made-up events, without speech or a model.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import wave
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from app.speech.resample import Resampler

RATE = 24_000  # the realtime API's input: 24 kHz PCM16 mono
FRAME = int(0.2 * RATE)  # 200 ms, sent in real time
SILENT = 64  # below this (int16) espeak's padding counts as silence

SENTENCES = {
    "en": ["The committee will publish its final report next spring.",
           "Thank you all for coming to this talk today.",
           "Our results show that the new method is faster.",
           "We will now take a few questions from the audience.",
           "The city plans to build a new bridge over the river.",
           "Most students passed the exam on their first attempt."],
    "de": ["Der Ausschuss wird seinen Bericht im nächsten Frühjahr veröffentlichen.",
           "Vielen Dank, dass Sie heute alle zu diesem Vortrag gekommen sind.",
           "Unsere Ergebnisse zeigen, dass die neue Methode schneller ist.",
           "Wir beantworten jetzt einige Fragen aus dem Publikum.",
           "Die Stadt plant eine neue Brücke über den Fluss.",
           "Die meisten Studenten haben die Prüfung beim ersten Versuch bestanden."],
}
# sentences of 6-9 s of speech, as a speaker's long sentences run: the commit policy's
# early commits need several agreeing partial translations before the segment ends,
# which the short ones above (about 3 s) rarely leave time for
LONG_SENTENCES = {
    "en": ["The committee that met in Geneva last week will publish its final report on "
           "the new water rules next spring, after a long public consultation.",
           "Thank you all for coming to this talk today, and a special thank you to the "
           "organisers who made this conference possible once again.",
           "Our results show that the new method is faster than the old one on every data "
           "set we tried, and that it needs much less memory.",
           "The city plans to build a new bridge over the river, so that people can walk "
           "and cycle from the old town to the station in ten minutes."],
    "de": ["Der Ausschuss, der letzte Woche in Genf getagt hat, wird seinen Bericht über die "
           "neuen Wasserregeln im nächsten Frühjahr veröffentlichen.",
           "Vielen Dank, dass Sie heute alle zu diesem Vortrag gekommen sind, und ein "
           "besonderer Dank an die Veranstalter dieser Konferenz.",
           "Unsere Ergebnisse zeigen, dass die neue Methode auf allen Datensätzen schneller "
           "ist als die alte und viel weniger Speicher braucht.",
           "Die Stadt plant eine neue Brücke über den Fluss, damit man in zehn Minuten von "
           "der Altstadt zum Bahnhof laufen oder radeln kann."],
}
ESPEAK_VOICES = {"en": "en-us", "de": "de"}


@dataclass
class Talk:
    """One speaker's speech: 24 kHz int16 PCM and where each sentence's speech ends
    (seconds into the PCM)."""

    sentences: list[str]
    pcm: np.ndarray
    ends_s: list[float] = field(default_factory=list)

    def end_frames(self) -> list[int]:
        """The index of the 200 ms frame that carries each sentence's last sample: once
        it is sent, the server has heard the whole sentence."""
        return [int(end * RATE) // FRAME for end in self.ends_s]


def espeak(text: str, lang: str, folder: Path) -> np.ndarray:
    """``text`` said by espeak-ng (150 words a minute), trimmed of its silent padding, at
    24 kHz on the int16 scale."""
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise RuntimeError("espeak-ng is not installed (make system-deps)")
    path = folder / "say.wav"
    subprocess.run([exe, "-v", ESPEAK_VOICES.get(lang, lang), "-s", "150", "-w", str(path),
                    text], check=True, capture_output=True, timeout=120)
    with wave.open(str(path)) as w:
        rate = w.getframerate()
        samples = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    loud = np.flatnonzero(np.abs(samples) >= SILENT)
    samples = samples[loud[0]:loud[-1] + 1] if len(loud) else samples[:0]
    return Resampler(rate, RATE).process(samples.astype(np.float64))


def compose(sentences: list[str], lang: str, lead_s: float, pause_s: float) -> Talk:
    """``lead_s`` of silence, then each sentence followed by ``pause_s`` of silence (the
    pause is what lets the recogniser end the segment, as a speaker's breath does)."""
    parts, at, ends = [np.zeros(int(lead_s * RATE))], lead_s, []
    with tempfile.TemporaryDirectory() as tmp:
        for text in sentences:
            speech = espeak(text, lang, Path(tmp))
            at += len(speech) / RATE
            ends.append(at)
            parts += [speech, np.zeros(int(pause_s * RATE))]
            at += pause_s
    pcm = np.clip(np.round(np.concatenate(parts)), -32768, 32767).astype("<i2")
    return Talk(sentences, pcm, ends)


@dataclass
class Timed:
    """A server event as the speaker saw it: its type, text delta (transcripts) and the
    wall-clock second it arrived."""

    kind: str
    at: float
    text: str = ""


@dataclass
class Segment:
    """What the server sent for one recognised segment."""

    source: str  # the input transcript delta: Whisper's final
    final_at: float  # when it came (with the segment's final translation)
    first_word_at: float | None  # the segment's first output transcript delta
    output: str = ""
    deltas: int = 0  # output transcript deltas: 1 when the whole translation came at once


def segments(events: list[Timed]) -> list[Segment]:
    """The session's segments. Each segment's output deltas come before its input
    transcript delta (the pipeline sends a final's commits, then its caption), so output
    deltas are grouped by the input delta that follows them."""
    out: list[Segment] = []
    first: float | None = None
    text, deltas = "", 0
    for e in events:
        if e.kind == "session.output_transcript.delta":
            first = e.at if first is None else first
            text += e.text
            deltas += 1
        elif e.kind == "session.input_transcript.delta":
            out.append(Segment(e.text.strip(), e.at, first, text.strip(), deltas))
            first, text, deltas = None, "", 0
    return out


def _words(text: str) -> set[str]:
    return {w.strip(".,!?;:\"'").lower() for w in text.split()} - {""}


def assign(segs: list[Segment], sentences: list[str]) -> list[list[Segment]]:
    """Each sentence's segments: a segment belongs to the sentence (at or after the last
    one assigned: order is kept) whose words it shares most of, a sentence still without
    a segment winning a tie (a misheard next sentence sharing one word with this one is
    the next); one sharing none is left out. A sentence Whisper split has several; one it
    merged into the previous one, none."""
    own: list[list[Segment]] = [[] for _ in sentences]
    at = 0
    for seg in segs:
        heard = _words(seg.source)
        scores = [(len(heard & _words(s)), not own[at + i])
                  for i, s in enumerate(sentences[at:])]
        if not scores or max(scores)[0] == 0:
            continue
        at += scores.index(max(scores))
        own[at].append(seg)
    return own


def latencies(events: list[Timed], talk: Talk, ends_at: list[float]) -> list[dict]:
    """Per sentence, from its speech end (``ends_at``: when the frame with its last sample
    was sent): the first committed word (its segment's first output transcript delta; it
    may come before the end, since commits come from partials: then it is negative), the
    first spoken audio (the first output audio delta after that word; when the voice is
    behind this is still the previous sentence's speech, as a listener would hear it), and
    the final (the input transcript delta that comes with the final translation)."""
    audio = [e.at for e in events if e.kind == "session.output_audio.delta"]
    rows = []
    for sentence, end, own in zip(talk.sentences, ends_at,
                                  assign(segments(events), talk.sentences), strict=True):
        firsts = [s.first_word_at for s in own if s.first_word_at is not None]
        word = min(firsts) if firsts else None
        spoken = next((t for t in audio if word is not None and t >= word), None)
        rows.append({"sentence": sentence, "segments": len(own),
                     "heard": " ".join(s.source for s in own),
                     "translation": " ".join(s.output for s in own),
                     "output_deltas": sum(s.deltas for s in own),
                     "first_word_s": _since(word, end), "first_audio_s": _since(spoken, end),
                     "final_s": _since(own[-1].final_at if own else None, end)})
    return rows


def _since(t: float | None, end: float) -> float | None:
    return None if t is None else round(t - end, 3)
