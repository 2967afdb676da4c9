"""Which synthesizer speaks a language: voice engines by name, chosen by configuration.

Beside the recogniser's registry (``app.speech.engines``), in the same shape. What is
specific to a voice engine is whether it can speak a language in this installation (its
package is there, it has a voice for the language) and how to build that language's
``Synthesizer`` (``app.voice.base``: ``info``, and a blocking ``synthesize(text, speed)``
that ``VoiceStream`` runs off the event loop). An engine says those two things; the
server's ``VoiceRegistry`` (``app.voice.registry``) asks the engines the operator chose
(``--voice-engine``), best first, and never names a synthesizer class itself.

Engines, in the order registered (``auto``'s order): Kokoro (Japanese), Piper (its
packaged English voice, joe) and espeak-ng, the fallback, which speaks any language left
under every choice but ``none``. Another engine (a cloud voice, another model) is one
``register`` call with its own ``VoiceEngine``; ``auto`` tries it before the fallback.
The operator's named Piper voices (``--voice LANG=PATH.onnx``) come before any engine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.voice import espeak, kokoro, piper
from app.voice.base import SynthesisError, Synthesizer

__all__ = ["AUTO", "ENGINES", "FALLBACK", "NONE", "VoiceEngine", "VoiceOptions", "choices",
           "chosen", "register"]

AUTO, NONE = "auto", "none"  # every engine, best first; no engine (named voices only)
FALLBACK = "espeak-ng"  # speaks what nothing else does, under every choice but ``none``


@dataclass(frozen=True)
class VoiceOptions:
    """What the operator configured for every voice (``serve --voice-*``)."""

    threads: int = 1  # CPU threads a voice's model may use (``--voice-threads``)


@dataclass(frozen=True)
class VoiceEngine:
    """One kind of voice, as the voice registry uses it."""

    name: str
    # whether it can speak the language in this installation (cheap: may ask a process once)
    speaks: Callable[[str], bool]
    # the language's voice: (language, options) -> Synthesizer; SynthesisError if it cannot
    open: Callable[[str, VoiceOptions], Synthesizer]


ENGINES: dict[str, VoiceEngine] = {}


def register(engine: VoiceEngine) -> None:
    """Make ``engine`` available by its name (a later one of the same name replaces it)."""
    ENGINES[engine.name] = engine


def choices() -> tuple[str, ...]:
    """What ``--voice-engine`` may name: ``auto``, every engine, ``none``."""
    return (AUTO, *ENGINES, NONE)


def chosen(name: str) -> list[VoiceEngine]:
    """The engines the choice ``name`` tries, best first: ``auto`` every engine (in the
    order registered, the fallback last), an engine's name that engine and the fallback,
    ``none`` none; ``ValueError`` naming the choices otherwise."""
    if name == NONE:
        return []
    if name == AUTO:
        names = [n for n in ENGINES if n != FALLBACK]
    elif name in ENGINES:
        names = [name] if name != FALLBACK else []
    else:
        raise ValueError(f"voice engine '{name}': one of {', '.join(choices())}")
    return [ENGINES[n] for n in [*names, FALLBACK] if n in ENGINES]


def _joe(lang: str, options: VoiceOptions) -> Synthesizer:
    voice = piper.packaged_english_voice()
    if voice is None:
        raise SynthesisError("Piper's packaged English voice is not installed")
    return piper.PiperSynthesizer(lang, voice, options.threads)


register(VoiceEngine(
    name="kokoro",
    speaks=lambda lang: lang in kokoro.LANGS and kokoro.installed(),
    open=lambda lang, options: kokoro.KokoroSynthesizer(lang),
))
register(VoiceEngine(
    name="piper",
    speaks=lambda lang: (lang == "en" and piper.installed()
                         and piper.packaged_english_voice() is not None),
    open=_joe,
))
register(VoiceEngine(
    name=FALLBACK,
    speaks=espeak.has_voice,
    open=lambda lang, options: espeak.EspeakSynthesizer(lang),
))
