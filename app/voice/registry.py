"""Which voice speaks a language on this server: ``lang -> Synthesizer``.

The operator's choice comes first: a Piper voice named for the language
(``serve --voice de=PATH.onnx``). Then the engines of ``--voice-engine``
(``app.voice.engines``, a registry like the recogniser's): ``auto`` takes the best engine
installed that speaks the language (Kokoro for Japanese, Piper's joe for English),
``piper`` / ``kokoro`` only that engine, ``espeak-ng`` espeak-ng for everything, ``none``
no voice beyond the named ones. espeak-ng serves any language left (except under
``none``). A language nothing speaks is ``VoiceUnavailable``.

Synthesizers are built once per language and shared by every stream; synthesis runs on
the registry's executor (``--voice-threads`` threads), so voices never take more of the
CPU than that from translation and recognition, however many listeners there are.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from app.voice import piper
from app.voice.base import SynthesisError, Synthesizer, VoiceUnavailable
from app.voice.catchup import CatchUp
from app.voice.engines import VoiceOptions, chosen
from app.voice.stream import VoiceLoss, VoiceMetrics, VoiceStream

log = logging.getLogger("livetrans.voice")


def parse_voice_entries(entries: list[str]) -> dict[str, Path]:
    """``--voice LANG=PATH.onnx`` entries (already checked by the settings) as a map."""
    voices: dict[str, Path] = {}
    for entry in entries:
        lang, _, path = entry.partition("=")
        voices[lang] = Path(path).expanduser()
    return voices


# what a voice says once when warmed (never heard: nobody listens yet)
WARM_TEXT = {"ja": "はい。", "zh": "好。", "de": "Gut.", "fr": "Bien.", "es": "Bien."}


class VoiceRegistry:
    """The server's voices, one per language, built on first use."""

    def __init__(self, piper_voices: Mapping[str, Path] | None = None, engine: str = "auto",
                 threads: int = 1, catch_up: CatchUp | None = None,
                 metrics: VoiceMetrics | None = None) -> None:
        self.piper_voices = dict(piper_voices or {})
        self.engine = engine
        self.engines = chosen(engine)  # best first (``app.voice.engines``; ValueError)
        self.options = VoiceOptions(threads)
        self.threads = threads
        self.catch_up = catch_up
        self.metrics = metrics  # every stream's counts, for /metrics
        self.executor = ThreadPoolExecutor(threads, thread_name_prefix="voice")
        self._voices: dict[str, Synthesizer | None] = {}
        self._lock = threading.Lock()

    def resolve(self, lang: str) -> Synthesizer:
        """The language's voice, or ``VoiceUnavailable``. The first call for a language
        may read a voice's config or ask espeak-ng for its voices (milliseconds, but a
        process): call it off the event loop."""
        with self._lock:
            if lang not in self._voices:
                self._voices[lang] = self._build(lang)
                voice = self._voices[lang]
                if voice is not None:
                    log.info("voice for %s: %s %s (%d Hz)", lang, voice.info.engine,
                             voice.info.voice, voice.info.sample_rate)
            voice = self._voices[lang]
        if voice is None:
            raise VoiceUnavailable(lang)
        return voice

    def _build(self, lang: str) -> Synthesizer | None:
        for make in self._candidates(lang):
            try:
                return make()
            except SynthesisError as exc:
                log.warning("voice for %s: %s", lang, exc)
        return None

    def _candidates(self, lang: str) -> list[Callable[[], Synthesizer]]:
        """The engines that could speak ``lang``, best first."""
        out: list[Callable[[], Synthesizer]] = []
        if lang in self.piper_voices:
            out.append(lambda: piper.PiperSynthesizer(lang, self.piper_voices[lang],
                                                      self.threads))
        for engine in self.engines:
            if engine.speaks(lang):
                out.append(lambda engine=engine: engine.open(lang, self.options))
        return out

    def warm(self, langs: list[str]) -> Future[list[str]]:
        """Build and load ``langs``' voices on the voices' threads, each speaking one word
        once (a Piper or Kokoro model loads on its first phrase: seconds, which the first
        listener would otherwise wait); the languages warmed. Languages nothing speaks are
        skipped here and told to their sessions as ever."""
        def run() -> list[str]:
            warmed = []
            for lang in langs:
                try:
                    voice = self.resolve(lang)
                    voice.synthesize(WARM_TEXT.get(lang, "OK."))
                except (VoiceUnavailable, SynthesisError) as exc:
                    log.info("voice for %s not warmed: %s", lang, type(exc).__name__)
                    continue
                except Exception:  # noqa: BLE001 - an engine's bug: its sessions will say
                    log.exception("voice for %s: warming failed", lang)
                    continue
                warmed.append(lang)
            return warmed

        return self.executor.submit(run)

    def stream(self, lang: str, on_loss: Callable[[VoiceLoss], None] | None = None,
               ) -> VoiceStream:
        """A new voice stream for ``lang`` on the registry's executor (``resolve``'s
        ``VoiceUnavailable`` when nothing speaks it)."""
        return VoiceStream(self.resolve(lang), executor=self.executor,
                           catch_up=self.catch_up, on_loss=on_loss, metrics=self.metrics,
                           cores=self.threads)

    def close(self) -> None:
        """The server stops: phrases not yet begun are not spoken."""
        self.executor.shutdown(wait=False, cancel_futures=True)
