"""Which recogniser a speaker's stream is: engines by name, chosen by configuration.

Why a registry: ``SpeechRecognition`` (``app.speech.service``) serves every audio speaker
with one shared model on one thread; what is specific to a recogniser is how to tell it
cannot run in this installation, how to load the model every stream shares (once, on the
first speaker), how to open one speaker's ``Recognizer`` over it, and, if it can, how to
hear a buffer's language. An engine says those four things; the service picks one by name
(``SpeechRecognition(engine=...)``) and never names a recogniser class itself.

``whisper`` (faster-whisper behind ``StreamingWhisper``) is the default and, today, the
only one. Another (a cloud API, a model with its own endpointer) is one ``register`` call
with its own ``RecognizerEngine``; a stream that is a ``ScheduledRecognizer`` gets the
shared thread's decode-by-decode scheduling, any other ``Recognizer`` is fed whole.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.speech.language_id import LanguageProbe
from app.speech.recognizer import Recognizer
from app.speech.whisper_stream import StreamingWhisper, load_whisper

__all__ = ["DEFAULT_ENGINE", "ENGINES", "RecognizerEngine", "RecognizerOptions",
           "engine_named", "register"]

DEFAULT_ENGINE = "whisper"


@dataclass(frozen=True)
class RecognizerOptions:
    """What the operator configured for the recogniser (``serve --asr-*``)."""

    model_dir: str | None = None  # the model's folder (None: the engine's bundled one)
    threads: int = 1  # CPU threads the shared model may use
    device: str = "auto"  # "auto", "cpu" or "cuda"
    window: str = "fit"  # Whisper's encoder window (``app.speech.whisper_window``)


@dataclass(frozen=True)
class RecognizerEngine:
    """One kind of recogniser, as the speech service uses it."""

    name: str
    # why it cannot run in this installation (a missing extra), in one sentence; None: it can
    missing: Callable[[], str | None]
    # the model every stream shares, loaded once (off the event loop)
    load: Callable[[RecognizerOptions], Any]
    # one speaker's stream over the shared model: (model, language, options) -> Recognizer
    open: Callable[[Any, str, RecognizerOptions], Recognizer]
    # a one-turn ``Recognizer`` whose single event's text is the language heard in a buffer
    # (model, audio, allowed languages); None: this engine cannot tell languages apart
    probe: Callable[[Any, np.ndarray, Collection[str]], Recognizer] | None = None
    # whether the loaded model computes on the CPU, where its decodes take cores from the
    # translation engine (``app.cores.CoreLoans``)
    on_cpu: Callable[[Any], bool] = lambda model: True


ENGINES: dict[str, RecognizerEngine] = {}


def register(engine: RecognizerEngine) -> None:
    """Make ``engine`` available by its name (a later one of the same name replaces it)."""
    ENGINES[engine.name] = engine


def engine_named(name: str) -> RecognizerEngine:
    """The engine called ``name``; ``ValueError`` naming the known ones otherwise."""
    try:
        return ENGINES[name]
    except KeyError:
        known = ", ".join(sorted(ENGINES))
        raise ValueError(f"unknown speech recogniser {name!r}: one of {known}") from None


def _whisper_missing() -> str | None:
    try:
        import faster_whisper  # noqa: F401
    except ImportError:
        return ("this server has no speech recogniser installed: "
                "pip install 'livetrans[speech]'")
    return None


def pick_device(device: str) -> str:
    """``auto`` is ``cuda`` when CTranslate2 sees a GPU, else ``cpu``."""
    if device != "auto":
        return device
    import ctranslate2

    return "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"


register(RecognizerEngine(
    name="whisper",
    missing=_whisper_missing,
    load=lambda o: load_whisper(o.model_dir, o.threads, pick_device(o.device)),
    open=lambda model, language, o: StreamingWhisper(model=model, language=language,
                                                     window=o.window),
    probe=LanguageProbe,
    on_cpu=lambda model: getattr(getattr(model, "model", None), "device", "cpu") == "cpu",
))
