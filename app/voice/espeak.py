"""espeak-ng (Debian's package) as a voice: every language the server translates into,
robotic but real, with nothing to download. It is the fallback engine of the registry.

Each phrase is one ``espeak-ng`` process writing WAV to its stdout. The text goes in on
stdin, never on the command line, so no text can ever be read as an option; control
characters are removed first (espeak-ng would read some of them as commands).
"""

from __future__ import annotations

import re
import shutil
import subprocess

from app.voice.base import SynthesisError, VoiceInfo, clamp_speed
from app.voice.pcm import wav_pcm16

ENGINE = "espeak-ng"
WORDS_PER_MINUTE = 175  # espeak-ng's own default rate: speed 1.0
SAMPLE_RATE = 22050  # what espeak-ng writes for its own voices
TIMEOUT_S = 60.0  # a phrase is seconds of speech; a stuck process is a failure
# espeak-ng's voice for each language code the server serves, where it differs
_VOICE_NAMES = {"en": "en-us", "zh": "cmn", "fr": "fr-fr", "pt": "pt"}
# C0/C1 controls (tabs and newlines too): spaces. Without -m, markup is read as text
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def binary() -> str | None:
    """The espeak-ng executable, or None when it is not installed."""
    return shutil.which("espeak-ng")


def voice_name(lang: str) -> str:
    """espeak-ng's voice for a language code (``zh`` is Mandarin, ``cmn``)."""
    return _VOICE_NAMES.get(lang, lang)


def has_voice(lang: str) -> bool:
    """espeak-ng is installed and has a voice for ``lang`` (its ``--voices=LANG`` list)."""
    exe = binary()
    if exe is None or not re.fullmatch(r"[a-z]{2,3}(-[A-Za-z0-9]{1,8})*", lang):
        return False
    try:
        listed = subprocess.run([exe, f"--voices={voice_name(lang)}"], capture_output=True,
                                text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return listed.returncode == 0 and len(listed.stdout.strip().splitlines()) > 1


def clean_text(text: str) -> str:
    """The text as espeak-ng may read it: control characters as spaces."""
    return _CONTROL.sub(" ", text).strip()


class EspeakSynthesizer:
    """One language's espeak-ng voice; ``synthesize`` runs one process per phrase (no
    shared state: any number of threads may call it)."""

    def __init__(self, lang: str, executable: str | None = None) -> None:
        exe = executable or binary()
        if exe is None:
            raise SynthesisError("espeak-ng is not installed")
        self.executable = exe
        self.voice = voice_name(lang)
        self.info = VoiceInfo(lang=lang, engine=ENGINE, voice=self.voice,
                              sample_rate=SAMPLE_RATE)

    def synthesize(self, text: str, speed: float = 1.0) -> bytes:
        """PCM16 of ``text``; ``speed`` scales espeak-ng's words per minute."""
        spoken = clean_text(text)
        if not spoken:
            return b""
        rate = round(WORDS_PER_MINUTE * clamp_speed(speed))
        # -b 1: the input is UTF-8; no text argument: espeak-ng reads stdin
        argv = [self.executable, "-v", self.voice, "-s", str(rate), "-b", "1", "--stdout"]
        try:
            done = subprocess.run(argv, input=spoken.encode("utf-8"), capture_output=True,
                                  timeout=TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise SynthesisError(f"espeak-ng took longer than {TIMEOUT_S:g} s") from None
        except OSError as exc:
            raise SynthesisError(f"espeak-ng could not run: {exc.strerror}") from None
        if done.returncode != 0 or not done.stdout:
            raise SynthesisError(f"espeak-ng failed for voice '{self.voice}' "
                                 f"(exit {done.returncode})")
        pcm, rate_hz = wav_pcm16(done.stdout)
        if rate_hz != self.info.sample_rate:
            raise SynthesisError(f"espeak-ng wrote {rate_hz} Hz, not {self.info.sample_rate}")
        return pcm
