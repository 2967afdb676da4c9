"""Speech end -> final caption, where it goes: the audio speakers' finals of
``eval.bench.speech.cost`` split into the parts the server measured.

The client times each final from the end of its sentence's speech (known from the
composed talk) to the caption's arrival; the final caption's ``stats`` say the rest (API.md
"Speech in": ``stats.speech``, and the translation's ``queue_wait_ms`` and ``decode_ms``).
The talk is streamed from its first sample at 16 kHz, so the stream's audio positions the
server reports are the talk's, and audio arrives in real time, so audio seconds are wall
seconds. Per final:

* **endpoint**: the silence the recogniser heard after the speech before it decided the
  segment had ended, less the audio that came late (``heard_s - late_audio - end``); it
  holds the endpoint setting (``endpoint_silence_s``), the VAD's edge after the words and
  one look of the VAD;
* **wait**: the recogniser's one thread was busy: audio heard late (it arrived while the
  turn before was still running, so the endpoint was decided late), the newest audio
  waiting for its turn to be asked (``audio_wait_ms``: the speaker's previous turn still
  running) and the turn waiting on the thread (``asr_wait_ms``, of which the thread's
  decoding of partials and of decodes finals wait for, anyone's);
* **decode**: the final's decode (``asr_decode_ms``; near zero when the decode at the pause
  had already heard it all);
* **translation**: the caption's queue and engine time (``queue_wait_ms + decode_ms``);
* **other**: the rest: the hand-off to the fan-out (``handoff_ms``, shown on its own: a
  final leaves the recogniser with its turn, after any later decode in that turn),
  publishing, the socket, the client, and a final tied to a sentence it does not end (a
  sentence heard as two finals).

A final whose speech, by the server, ended before its sentence's end (a split sentence's
first part) counts no endpoint silence. Percentiles are per part: the p90s do not add up
to the total's p90.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from eval.tables import Table

# the parts, in the order a final passes them, and their labels
PARTS: tuple[str, ...] = ("endpoint", "wait", "decode", "translation", "other")
# what the wait is made of (inside ``wait``)
WAIT_PARTS: tuple[str, ...] = ("late_audio", "audio_wait", "asr_wait", "behind_partials",
                               "behind_finals")
OTHER_PARTS: tuple[str, ...] = ("handoff",)  # inside ``other``
LABELS = {"endpoint": "endpoint silence", "wait": "waiting on the recogniser",
          "behind_partials": "… behind partial decodes", "behind_finals":
          "… behind final decodes", "decode": "final's decode",
          "translation": "translation", "other": "other (delivery)",
          "handoff": "… hand-off to translation", "total": "total"}
TITLE = "speech end → final caption, where it goes (p50 / p90 s)"


def final_parts(end_s: float, latency_s: float, stats: dict[str, Any]) -> dict[str, float] | None:
    """One final's latency (``latency_s``: its sentence's speech ended at ``end_s`` of the
    talk) split into ``PARTS``, ``WAIT_PARTS`` and ``OTHER_PARTS`` (seconds); None when its
    caption carries no speech timings (a server before them)."""
    speech = stats.get("speech")
    if not speech or "heard_s" not in speech:
        return None

    def s(key: str, where: dict[str, Any] = speech) -> float:
        return max(0.0, float(where.get(key) or 0.0)) / 1000

    late = s("late_audio_ms")
    parts = {
        "endpoint": max(0.0, speech["heard_s"] - late - end_s),
        "late_audio": late, "audio_wait": s("audio_wait_ms"), "asr_wait": s("asr_wait_ms"),
        "behind_partials": s("asr_behind_partials_ms"),
        "behind_finals": s("asr_behind_finals_ms"),
        "decode": s("asr_decode_ms"), "handoff": s("handoff_ms"),
        "translation": s("queue_wait_ms", stats) + s("decode_ms", stats),
    }
    parts["wait"] = parts["late_audio"] + parts["audio_wait"] + parts["asr_wait"]
    parts["other"] = latency_s - sum(parts[p] for p in PARTS if p != "other")
    parts["total"] = latency_s
    return parts


def breakdown(finals: list[dict[str, float]]) -> dict[str, Any]:
    """p50 and p90 of every part and the total over ``finals`` (``final_parts`` rows),
    in seconds; ``finals``: how many."""
    out: dict[str, Any] = {"finals": len(finals)}
    for part in (*PARTS, *WAIT_PARTS, *OTHER_PARTS, "total"):
        values = [f[part] for f in finals if part in f]
        for q in (50, 90):
            out[f"{part}_s_p{q}"] = (round(float(np.percentile(values, q)), 3)
                                     if values else None)
    return out


def breakdown_table(summaries: list[dict[str, Any]]) -> Table:
    """One row per run of ``cost_run`` (its ``summary``'s ``breakdown``)."""
    shown = ("endpoint", "wait", "behind_partials", "behind_finals", "decode",
             "translation", "other", "handoff", "total")
    named = any("server" in s for s in summaries)  # --versus
    t = Table((["server", "round"] if named else [])
              + ["audio speakers", "finals", *(LABELS[p] for p in shown)], title=TITLE)
    for summary in summaries:
        b = summary.get("breakdown") or {}
        if not b.get("finals"):
            continue
        t.add(*([summary.get("server", "-"), summary.get("round", "-")] if named else []),
              summary["audio_speakers"], b["finals"],
              *(f"{_cell(b[f'{p}_s_p50'])} / {_cell(b[f'{p}_s_p90'])}" for p in shown))
    return t


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
