"""``livetrans caption``: a live-caption client for ``WebSocket /v1/live``.

    livetrans caption --file ASR.jsonl [--limit 20] [--speed 1 | --fast] [--target-lang de]
    some-asr | livetrans caption --stdin --target-lang de
    livetrans caption --audio talk.m4a|URL|- [--realtime] --target-lang de [--room NAME]

It replays recorded ASR streams (JSONL, one utterance per line with timed partial/final
events; the format of eval/samples/asr_sample_en.jsonl) in real time, honouring the ``t`` offsets
(``--speed 2`` is twice as fast, ``--fast`` sends as fast as possible), or reads partials
from stdin, one JSON object per line (``{"type": "partial"|"final", "text": ...}``), so any
real ASR can be piped in, or sends speech (``--audio``: a file of any container and codec
FFmpeg reads, sent as fast as the server takes it or paced with ``--realtime``; a live URL,
reopened when it drops; or raw 16 kHz PCM on stdin) for the server's Whisper to recognise
(``--asr pocketsphinx`` recognises it here instead). The terminal shows the live captions
(and, with speech, the audio's progress and level): finals scroll up, the current segment
shows its ``display_text`` (the masked tail stays hidden); with speech,
each final shows the recognised source above its translations, so a bad caption can be
told apart from a bad recognition. ``--target-lang de,ja`` captions every update in each
language, and ``--room NAME`` publishes the captions to viewers (printing their links). At
the end it prints per-stream statistics: captions, finals, time from each final to its
caption (p50/p95; with server-side speech, where the final is made in the server, from the
end of the speech sent before it: ``clients.speech_ends``), normalized erasure of the
displayed captions, and A/O. With ``--json`` the statistics are the only thing on stdout
(one JSON object); captions, room links and server errors go to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import websockets
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from app.engine.draft_stats import DraftStats
from app.prefix import normalized_erasure
from app.translation.display import display_unit, split_units
from app.usage import PlainHelp, UsageError, checked, comma_list, positive_int
from clients.asr_file import check_event, json_line, load_utterances
from clients.audio import RATE, AudioSource, open_audio
from clients.audio_source import Meter, Reconnect
from clients.live_session import LiveSession, LiveSessionRefused
from clients.speech_ends import SpeechEnds
from clients.urls import default_server, live_url, watch_url
from drafters.chain import DEFAULT_ORDER as DRAFTER_NAMES

AUDIO_FRAME_S = 0.2  # speech to the server: 200 ms per binary frame


@dataclass
class SegmentLog:
    displays: list[str] = field(default_factory=list)
    final_sent_at: float | None = None
    final_caption_at: float | None = None
    final_text: str = ""
    accepted: int = 0
    output: int = 0


@dataclass
class RunStats:
    captions: int = 0
    errors: list[dict] = field(default_factory=list)
    # one log per segment and caption language (a fan-out session captions each segment
    # once per language); ``lang`` None where a caller does not tell languages apart
    segments: dict[tuple[int, str | None], SegmentLog] = field(default_factory=dict)
    # why the server refused an output as the next draft (app.translation.pathology), and finals
    # that
    # were translated again from scratch: "copy" -> count
    drafts_dropped: Counter[str] = field(default_factory=Counter)
    finals_retried: Counter[str] = field(default_factory=Counter)
    # draft tokens proposed / accepted by source over every caption (``stats.drafts``)
    drafts: DraftStats = field(default_factory=DraftStats)
    # speech the server recognises: finals are timed from the end of the speech sent
    speech_ends: SpeechEnds | None = None

    def count_drafts(self, caption_stats: dict[str, Any]) -> None:
        """Add a caption's ``stats.drafts`` (absent from servers older than the field)."""
        drafts = caption_stats.get("drafts") or {}
        accepted = drafts.get("accepted", {})
        for name, n in drafts.get("proposed", {}).items():
            self.drafts.add(name, n, accepted.get(name, 0))

    def seg(self, n: int, lang: str | None = None) -> SegmentLog:
        return self.segments.setdefault((n, lang), SegmentLog())

    def final_caption(self, seg: SegmentLog, lang: str | None, at: float) -> None:
        """A final caption arrived at ``at``; with server-side speech its latency counts
        from the end of the speech it follows (the client sent no final)."""
        seg.final_caption_at = at
        if self.speech_ends is not None:
            seg.final_sent_at = self.speech_ends.end_before(at, lang)

    def final_sent(self, segment: int, langs: list[str]) -> None:
        """The final of ``segment`` left now: each language's caption is timed from here."""
        now = time.perf_counter()
        for lang in langs:
            self.seg(segment, lang).final_sent_at = now

    def summary(self, unit: str) -> dict[str, Any]:
        """The run's figures; NE counts ``unit`` (word or char) for logs without a language,
        the language's own unit otherwise."""
        latencies = [
            (s.final_caption_at - s.final_sent_at) * 1000
            for s in self.segments.values()
            if s.final_sent_at is not None and s.final_caption_at is not None
        ]
        streams = [[split_units(d, display_unit(lang) if lang else unit) for d in s.displays]
                   for (_, lang), s in self.segments.items() if s.displays]
        finals = sum(1 for s in self.segments.values() if s.final_caption_at is not None)
        p50, p95 = np.percentile(latencies, [50, 95]) if latencies else (None, None)
        accepted = sum(s.accepted for s in self.segments.values())
        output = sum(s.output for s in self.segments.values())
        since = "final" if self.speech_ends is None else "speech_end"
        return {
            "captions": self.captions,
            "finals": finals,
            f"{since}_to_caption_ms_p50": _round(p50),
            f"{since}_to_caption_ms_p95": _round(p95),
            f"{since}_to_caption_ms_max": _round(max(latencies)) if latencies else None,
            "ne_display": round(normalized_erasure(streams), 3) if streams else None,
            "a_over_o": round(accepted / output, 3) if output else None,
            "errors": len(self.errors),
            "drafts_dropped": _reasons(self.drafts_dropped),
            "finals_retried": _reasons(self.finals_retried),
            "drafts_accepted": _by_source(self.drafts),
        }


def _by_source(drafts: DraftStats) -> str:
    """``ssbd 40/52, ngram 3/9`` (accepted/proposed draft tokens; or ``0``)."""
    return ", ".join(f"{name} {drafts.accepted.get(name, 0)}/{n}"
                     for name, n in sorted(drafts.proposed.items())) or "0"


def _reasons(counts: Counter[str]) -> str:
    """``copy 2, loop 1`` (or ``0``): compact for the one-row-per-statistic table."""
    return ", ".join(f"{k} {v}" for k, v in counts.most_common()) or "0"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def stdin_event(line: str, number: int) -> dict:
    """A stdin line as a ``partial``/``final`` event (``UsageError`` if it is not one)."""
    return check_event(json_line(line, f"stdin line {number}"), f"stdin line {number}")


class CaptionView:
    """Terminal rendering: finished captions scroll up, the live one of each language is
    redrawn in place (a fan-out session shows one line per language, marked with it)."""

    def __init__(self, console: Console, enabled: bool, langs: list[str] | None = None,
                 show_source: str | None = None, meter: Meter | None = None) -> None:
        self.console = console
        self.enabled = enabled
        # speech in: progress and level of the audio sent, redrawn with the live captions
        self.meter = meter
        self.marked = len(langs or []) > 1 or show_source is not None
        # speech in: each final's recognised source, marked with this language, once
        self.show_source = show_source
        self.sources_shown: set[int] = set()
        self.current: dict[str | None, dict[str, Any]] = {}
        self.live: Live | None = None

    def __enter__(self) -> CaptionView:
        if self.enabled:
            # get_renderable: the meter moves between captions, so each refresh re-renders
            self.live = Live(console=self.console, refresh_per_second=12, transient=True,
                             get_renderable=self._render)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    def _render(self) -> Table:
        table = Table.grid(padding=(0, 1))
        if self.meter is not None:
            table.add_row(Text(self.meter.line(), style="dim"))
        if self.current:
            table.add_row(Text(next(iter(self.current.values())).get("source", ""), style="dim"))
        for lang, msg in self.current.items():
            table.add_row(Text(self._mark(lang), style="dim")
                          + Text(msg.get("display_text", ""), style="bold cyan"))
        return table

    def _mark(self, lang: str | None) -> str:
        return f"{lang}: " if self.marked and lang else ""

    def caption(self, msg: dict[str, Any]) -> None:
        if not self.enabled:
            return
        lang = msg.get("lang")
        if msg["final"]:
            self.current.pop(lang, None)
            if self.show_source and msg["segment"] not in self.sources_shown:
                self.sources_shown.add(msg["segment"])
                self.console.print(Text(f"[{msg['segment']}] {self.show_source}: ",
                                        style="dim") + Text(msg.get("source", ""),
                                                            style="italic"))
            self.console.print(Text(f"[{msg['segment']}] {self._mark(lang)}", style="dim")
                               + Text(msg["text"]))
        else:
            self.current[lang] = msg
        if self.live is not None:
            self.live.update(self._render())


async def _receiver(ws, stats: RunStats, view: CaptionView, langs: list[str]) -> None:
    async for raw in ws:
        msg = json.loads(raw)
        if msg["type"] == "caption":
            stats.captions += 1
            seg = stats.seg(msg["segment"], msg.get("lang", langs[0]))
            seg.displays.append(msg["display_text"])
            view.caption(msg)
            verdict = msg.get("stats", {})
            stats.count_drafts(verdict)
            if verdict.get("draft_dropped") and not msg["final"]:
                stats.drafts_dropped[verdict["draft_dropped"]] += 1
            if verdict.get("retried"):
                stats.finals_retried[verdict["retried"]] += 1
            if msg["final"]:
                stats.final_caption(seg, msg.get("lang", langs[0]), time.perf_counter())
                seg.final_text = msg["text"]
                seg.accepted += msg["stats"]["accepted_tokens"]
                seg.output += msg["stats"]["accepted_tokens"] + msg["stats"]["new_tokens"]
        elif msg["type"] == "error":
            stats.errors.append(msg)
        elif msg["type"] == "done":
            return


async def _send_utterances(ws, utterances: list[dict], speed: float | None,
                           stats: RunStats, langs: list[str]) -> None:
    for seg, utt in enumerate(utterances):
        start = time.perf_counter()
        for ev in utt["events"]:
            if speed is not None:
                delay = start + float(ev.get("t", 0.0)) / speed - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
            await ws.send(json.dumps({"type": ev["type"], "segment": seg, "text": ev["text"]}))
            if ev["type"] == "final":
                stats.final_sent(seg, langs)


async def _stdin_events() -> AsyncIterator[dict]:
    """Updates read from stdin, one JSON object a line; a final closes its segment."""
    loop = asyncio.get_running_loop()
    seg = 0
    number = 0
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        number += 1
        if not line:
            return
        line = line.strip()
        if not line:
            continue
        ev = stdin_event(line, number)
        try:
            segment = int(ev.get("segment", seg))
        except (TypeError, ValueError):
            raise UsageError(f"stdin line {number}: 'segment' must be an integer") from None
        yield {"type": ev["type"], "segment": segment, "text": ev["text"]}
        if ev["type"] == "final":
            seg = segment + 1


async def _audio_events(audio: AudioSource, speed: float | None) -> AsyncIterator[dict]:
    """Updates from the embedded ASR, decoded (and paced) on a worker thread."""
    loop = asyncio.get_running_loop()
    events = audio.events(speed)
    while (ev := await loop.run_in_executor(None, next, events, None)) is not None:
        yield ev


async def _send_speech(ws, audio: AudioSource, speed: float | None,
                       interrupted: asyncio.Event | None = None,
                       ends: SpeechEnds | None = None) -> None:
    """Speech for the server's recogniser: 16 kHz PCM frames, read (and paced) on a worker
    thread so that captions keep arriving while the input is read. ``interrupted`` (Ctrl-C
    on a live source, which never ends by itself) ends the input where it is: the caller
    then sends ``stop`` and the last words are still captioned. ``ends`` notes where the
    speech sent pauses (the captions' latency counts from there)."""
    loop = asyncio.get_running_loop()
    chunks = audio.chunks(speed, AUDIO_FRAME_S)
    interrupted = interrupted or asyncio.Event()
    stop = asyncio.ensure_future(interrupted.wait())
    try:
        while True:
            read = loop.run_in_executor(None, next, chunks, None)
            await asyncio.wait({read, stop}, return_when=asyncio.FIRST_COMPLETED)
            if not read.done():  # the read in progress ends soon: the source is cancelled
                audio.cancel()
                return
            if (chunk := read.result()) is None:
                return
            await ws.send(chunk)
            if ends is not None:
                ends.sent(chunk, time.perf_counter())
    finally:
        stop.cancel()
        if ends is not None:
            ends.finish()


def audio_speed(args: argparse.Namespace) -> float | None:
    """How an ``--audio`` file is paced: as fast as the server takes it, unless
    ``--realtime`` (times ``--speed``); a live source or stdin sets its own pace."""
    return args.speed if getattr(args, "realtime", False) else None


def _interrupt_on_sigint(event: asyncio.Event) -> Callable[[], None]:
    """The first Ctrl-C sets ``event`` (end the audio, flush the captions); a second one
    interrupts as usual. Returns the undo; a no-op where signals cannot be handled."""
    loop = asyncio.get_running_loop()

    def first() -> None:
        event.set()
        print("livetrans caption: ending the talk (Ctrl-C again to quit at once)",
              file=sys.stderr, flush=True)
        loop.remove_signal_handler(signal.SIGINT)

    try:
        loop.add_signal_handler(signal.SIGINT, first)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, Windows
        return lambda: None
    return lambda: loop.remove_signal_handler(signal.SIGINT)


async def _send_events(ws, events: AsyncIterator[dict], stats: RunStats,
                       langs: list[str]) -> None:
    async for ev in events:
        await ws.send(json.dumps({"type": ev["type"], "segment": ev["segment"],
                                  "text": ev["text"]}))
        if ev["type"] == "final":
            stats.final_sent(ev["segment"], langs)


def server_recognises(args: argparse.Namespace) -> bool:
    """Speech sent to the server's recogniser (``--audio`` with ``--asr server``)."""
    return bool(getattr(args, "audio", None)) and getattr(args, "asr", "server") == "server"


def start_message(args: argparse.Namespace) -> dict[str, Any]:
    """The session's ``start``: one caption language (``target_lang``) or several
    (``target_langs``, API.md "Events"), the room it publishes to, if any, and speech
    input when the server recognises it."""
    langs = args.target_langs
    start: dict[str, Any] = {"type": "start", "source_lang": args.source_lang,
                             "beta": args.beta, "mask_k": args.mask_k}
    if server_recognises(args):
        start.update(input="audio", sample_rate=RATE)
    if len(langs) == 1:
        start["target_lang"] = langs[0]
    else:
        start["target_langs"] = langs
    if args.drafters is not None:
        start["drafters"] = [d for d in args.drafters.split(",") if d]
    if args.room:
        start["room"] = args.room
    return start


def closed_message(exc: websockets.ConnectionClosed) -> str:
    """One sentence for a socket the server closed before the session ended: its close
    code and reason (``1008 invalid API key``), with what to do about the usual ones."""
    frame = exc.rcvd
    if frame is None:
        return "the server went away (the connection dropped without a close frame)"
    why = f"{frame.code} {frame.reason}".strip()
    hint = ""
    if "api key" in frame.reason.lower():
        hint = "; pass the server's key with --api-key"
    elif frame.code in (1001, 1012):
        hint = "; the server is shutting down or restarting"
    elif frame.code == 1013:
        hint = "; the server is busy, try again later"
    return f"the server closed the connection ({why}){hint}"


async def run_client(args: argparse.Namespace, utterances: list[dict] | None,
                     console: Console, audio: AudioSource | None = None) -> RunStats:
    """One live session: connect, ``start``, send every update, ``stop``, and collect the
    captions. What the user can fix (no server, a refused ``start``, a key the server
    rejects) ends as ``UsageError``."""
    url = live_url(args.server)
    live = LiveSession(url, api_key=args.api_key, open_timeout=10)
    try:
        await live.connect()
    except (OSError, TimeoutError, websockets.exceptions.InvalidHandshake,
            websockets.exceptions.InvalidURI) as exc:
        raise UsageError(f"cannot reach the livetrans server at {url}: "
                         f"{exc or type(exc).__name__}") from None
    try:
        async with live:
            return await _session(live, args, utterances, console, audio)
    except websockets.ConnectionClosed as exc:
        raise UsageError(closed_message(exc)) from None


async def _session(live: LiveSession, args: argparse.Namespace,
                   utterances: list[dict] | None, console: Console,
                   audio: AudioSource | None) -> RunStats:
    stats = RunStats()
    langs = args.target_langs
    ws = live.ws
    fields = {k: v for k, v in start_message(args).items() if k != "type"}
    try:
        ready = await live.start(**fields)
    except LiveSessionRefused as refused:
        hint = ("; or recognise the speech here: --asr pocketsphinx"
                if refused.frame.get("code") == "speech_unavailable" else "")
        raise UsageError(f"the server refused the session: {refused.frame.get('code')}: "
                         f"{refused.frame.get('message')}{hint}") from None
    if args.room:
        for lang in langs:
            link = watch_url(args.server, args.room, lang, ready.get("viewer_token"))
            console.print(f"room {args.room!r}: viewers watch at {link}", markup=False,
                          highlight=False, soft_wrap=True)  # a link cut in two is no link
    shown_source = args.source_lang if getattr(args, "audio", None) else None
    meter = audio.meter if audio is not None else None
    with CaptionView(console, enabled=not args.quiet, langs=langs,
                     show_source=shown_source, meter=meter) as view:
        receiver = asyncio.create_task(_receiver(ws, stats, view, langs))
        try:
            speed = None if args.fast else args.speed
            if utterances is not None:
                await _send_utterances(ws, utterances, speed, stats, langs)
            elif audio is not None and audio.recognizer is None:
                interrupted = asyncio.Event()
                undo = _interrupt_on_sigint(interrupted) if audio.live else (lambda: None)
                stats.speech_ends = SpeechEnds(rate=RATE)
                try:
                    await _send_speech(ws, audio, audio_speed(args), interrupted,
                                       stats.speech_ends)
                finally:
                    undo()
            else:
                events = (_stdin_events() if audio is None
                          else _audio_events(audio, audio_speed(args)))
                await _send_events(ws, events, stats, langs)
            await live.stop()
            await receiver
        finally:
            # a send that failed (bad stdin input, the server gone) must not leave the
            # receiver to die with the socket and print its own traceback: the sender's
            # error is the one reported
            if not receiver.done():
                receiver.cancel()
            elif not receiver.cancelled():
                receiver.exception()  # marks it retrieved
    return stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="livetrans caption", description=__doc__,
                                 formatter_class=PlainHelp)
    ap.add_argument("--server", default=default_server(),
                    help="the server's address (http://, https://, ws:// or wss://; default: "
                         "$LIVETRANS_SERVER, else %(default)s)")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--file", type=Path, help="ASR partials JSONL to replay")
    src.add_argument("--stdin", action="store_true", help="read partials from stdin")
    src.add_argument("--audio", metavar="SOURCE",
                     help="speech in: a file of any container and codec FFmpeg reads (WAV, "
                          "MP3, M4A, Opus, MP4 or MKV video: the first audio stream), a live "
                          "URL (http(s)://...m3u8, rtmp://, rtsp://, udp://, tcp://), or '-' "
                          "for raw 16 kHz s16le mono PCM on stdin; the server's Whisper "
                          "recognises it (see --asr)")
    ap.add_argument("--asr", choices=("server", "pocketsphinx"), default="server",
                    help="who recognises --audio: the server (Whisper, default) or the "
                         "embedded PocketSphinx here, for a server without speech input "
                         "(pip install 'livetrans[audio]'; far more word errors)")
    ap.add_argument("--limit", type=checked(positive_int, "a whole number >= 1"),
                    default=None, help="first N utterances of --file")
    ap.add_argument("--speed", type=float, default=1.0,
                    help="replay speed factor (--file, and an --audio file with --realtime)")
    ap.add_argument("--fast", action="store_true",
                    help="send as fast as possible (--file; an --audio file always is, "
                         "unless --realtime)")
    ap.add_argument("--realtime", action="store_true",
                    help="pace an --audio file like a live source, in real time (a live "
                         "URL and stdin set their own pace)")
    ap.add_argument("--source-timeout", type=float, default=10.0, metavar="SECONDS",
                    help="a live --audio URL: how long opening it, or waiting for its next "
                         "packet, may take before it counts as dropped")
    ap.add_argument("--reconnect-for", type=float, default=600.0, metavar="SECONDS",
                    help="a live --audio URL that drops is reopened with backoff for this "
                         "long; then the talk ends")
    ap.add_argument("--target-lang", "--target-langs", dest="target_lang", default="de",
                    help="caption language, ISO 639-1; several, comma-separated (de,ja), "
                         "caption every update in each (up to 5)")
    ap.add_argument("--source-lang", default="en", help="speech language, ISO 639-1")
    ap.add_argument("--beta", type=float, default=0.2,
                    help="SSBD bias toward the previous translation, 0 <= beta < 1 "
                         "(0: greedy)")
    ap.add_argument("--mask-k", type=int, default=3,
                    help="trailing tokens a partial caption hides (0: none)")
    ap.add_argument("--drafters", default=None, type=comma_list(choices=DRAFTER_NAMES),
                    help="comma-separated drafter names; '' = plain autoregressive")
    ap.add_argument("--api-key", default=None, help="bearer token, if the server needs one")
    ap.add_argument("--room", default=None, metavar="NAME",
                    help="also publish the captions to this room (1-64 of A-Z a-z 0-9 . _ -): "
                         "viewers follow them on the caption screen /watch?room=NAME&lang=LANG, "
                         "one link per caption language is printed (with the viewer token when "
                         "the server has API keys); one speaker per room")
    ap.add_argument("--quiet", action="store_true", help="no live rendering, stats only")
    ap.add_argument("--json", action="store_true",
                    help="print the statistics as JSON, the only output on stdout (captions, "
                         "room links and server errors go to stderr)")
    args = ap.parse_args(argv)
    if not args.speed > 0:
        raise UsageError(f"--speed must be a positive factor, got {args.speed}")
    if args.realtime and args.fast:
        raise UsageError("--realtime and --fast contradict each other: give one")
    if not args.source_timeout > 0 or not args.reconnect_for >= 0:
        raise UsageError("--source-timeout must be > 0 and --reconnect-for >= 0 seconds")
    args.target_langs = [lang.strip() for lang in args.target_lang.split(",") if lang.strip()]
    if not args.target_langs:
        raise UsageError("--target-lang names no language (e.g. --target-lang de)")

    # --json: stdout is the statistics' JSON only, so it can be piped; what a person reads
    # (captions, room links, server errors) goes to stderr
    console = Console(stderr=args.json)
    utterances = load_utterances(args.file, args.limit) if args.file else None
    # the audio is checked (file, format, PocketSphinx) before the server is contacted
    audio = open_audio(args.audio, embedded=args.asr == "pocketsphinx",
                       timeout_s=args.source_timeout,
                       reconnect=Reconnect(give_up_s=args.reconnect_for)) if args.audio else None
    stats = asyncio.run(run_client(args, utterances, console, audio))
    summary = stats.summary(display_unit(args.target_langs[0]))
    if args.json:
        print(json.dumps(summary))
    else:
        # one row per statistic: a wide one-row table gets its headers cut off in a pipe
        table = Table(title="livetrans caption: stream statistics")
        table.add_column("statistic")
        table.add_column("value", justify="right")
        for key, value in summary.items():
            table.add_row(key, "-" if value is None else str(value))
        console.print(table)
    for err in stats.errors:
        console.print(f"[red]server error[/red] {err.get('code')}: {err.get('message')}")
    return 0


if __name__ == "__main__":  # as ``livetrans caption``: a mistake is one line, exit code 2
    from app.cli import main as livetrans

    raise SystemExit(livetrans(["caption", *sys.argv[1:]]))
