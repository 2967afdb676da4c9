"""PocketSphinx as a streaming recogniser: the embedded one of ``livetrans caption --asr
pocketsphinx``, and the baseline ``livetrans bench speech`` measures Whisper against.

PocketSphinx installs from PyPI with its US English model inside the wheel (``pip install
'livetrans[audio]'``), so it runs with nothing else to download; its words are rough next to
Whisper's. It yields the updates a text client sends (``{"type": "partial"|"final",
"segment": n, "text": ...}``), so a caption client treats it like any other ASR.
"""

from __future__ import annotations

from typing import Any

from app.speech.resample import RATE
from app.usage import UsageError

INSTALL_HINT = "pip install 'livetrans[audio]' (or: pip install pocketsphinx)"


def load_pocketsphinx() -> Any:
    """The ``pocketsphinx`` module, or a one-line ``UsageError`` telling how to install it."""
    try:
        import pocketsphinx
    except ImportError:
        raise UsageError(f"--audio needs PocketSphinx, which is not installed: {INSTALL_HINT}"
                         ) from None
    return pocketsphinx


def tidy(text: str, final: bool) -> str:
    """PocketSphinx's lower-case words as caption text: ``I`` and a capital to start.

    A final also gets a full stop, so the translator sees a sentence. Partials are not
    given one, so each partial stays a prefix of its final (what SSBD drafts from).
    """
    words = ["I" if w == "i" else "I'" + w[2:] if w.startswith("i'") else w
             for w in text.split()]
    out = " ".join(words)
    out = out[:1].upper() + out[1:]
    return out + "." if final and out and out[-1] not in ".?!" else out


class PocketSphinxStream:
    """PocketSphinx with its endpointer: 16 kHz PCM in, partial/final updates out.

    The endpointer (a VAD with a 0.3 s decision window) decides where utterances begin and
    end; each becomes one segment. The decoder sees only speech, utterance by utterance, and
    is asked for its hypothesis once per fed chunk, so partials come at most every chunk and
    only when the words changed.
    """

    def __init__(self, pocketsphinx: Any | None = None) -> None:
        ps = pocketsphinx or load_pocketsphinx()
        self.endpointer = ps.Endpointer(sample_rate=RATE)
        # the wheel's default US English model; FATAL keeps its INFO log off the terminal
        self.decoder = ps.Decoder(samprate=RATE, loglevel="FATAL")
        self.frame_bytes: int = self.endpointer.frame_bytes
        self.segment = 0
        self._pending = b""  # bytes short of one endpointer frame
        self._speech = bytearray()  # speech the decoder has not seen yet
        self._in_utt = False
        self._last = ""  # the last partial sent in this utterance

    def feed(self, pcm: bytes) -> list[dict]:
        """Updates for one chunk of 16 kHz s16le mono audio."""
        data = self._pending + pcm
        n = len(data) - len(data) % self.frame_bytes
        self._pending = data[n:]
        events: list[dict] = []
        for i in range(0, n, self.frame_bytes):
            self._frame(self.endpointer.process(data[i:i + self.frame_bytes]), events)
        if self._in_utt:
            self._decode()
            self._partial(events)
        return events

    def finish(self) -> list[dict]:
        """Updates at the end of the audio: the utterance still open is made final."""
        events: list[dict] = []
        if self.endpointer.in_speech:
            speech = self.endpointer.end_stream(self._pending)
            self._pending = b""
            if speech:
                if not self._in_utt:
                    self._start()
                self._speech += speech
        if self._in_utt:
            self._end(events)
        return events

    def _frame(self, speech: bytes | None, events: list[dict]) -> None:
        if speech is None:
            return
        if not self._in_utt:
            self._start()
        self._speech += speech
        if not self.endpointer.in_speech:
            self._end(events)

    def _start(self) -> None:
        self.decoder.start_utt()
        self._in_utt = True
        self._last = ""

    def _decode(self) -> None:
        if self._speech:
            self.decoder.process_raw(bytes(self._speech))
            self._speech.clear()

    def _words(self) -> str:
        hyp = self.decoder.hyp()
        return "" if hyp is None else " ".join(hyp.hypstr.split())

    def _partial(self, events: list[dict]) -> None:
        words = self._words()
        if words and words != self._last:
            self._last = words
            events.append({"type": "partial", "segment": self.segment,
                           "text": tidy(words, final=False)})

    def _end(self, events: list[dict]) -> None:
        self._decode()
        self.decoder.end_utt()
        self._in_utt = False
        # the final's search can come up empty where partials did not: keep the last partial
        # (the server needs text for a final, and the viewers saw those words)
        words = self._words() or self._last
        if words:
            events.append({"type": "final", "segment": self.segment,
                           "text": tidy(words, final=True)})
            self.segment += 1
