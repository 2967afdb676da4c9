"""Whisper decodes over a window fitted to the buffer instead of a fixed 30 s.

Why: Whisper was trained on 30 s windows and faster-whisper's ``transcribe`` pads every
buffer to 30 s, so a 3 s partial costs the same encoder pass as 30 s of speech (about
1.1 s of one CPU thread for Whisper base), and the encoder is most of a decode. A live
recogniser decodes short buffers many times. CTranslate2 runs Whisper's encoder on any
even number of frames (the positional embeddings are sliced to the input), so the window
can fit the buffer plus a margin of silence, which is what whisper.cpp's ``audio_ctx``
option does. Measured on this project's 2-core machine (``docs/audio-in.md``): a 3-4 s
buffer decodes in about a quarter of the time, with the same words on the speech bench.

The decode itself mirrors ``transcribe`` with the options the live path always used
(greedy, no previous text, temperature 0, no timestamps tokens) and takes the words'
times from CTranslate2's cross-attention alignment, as faster-whisper's word timestamps
do. A window never exceeds the 30 s the model knows.

A short window has one failure the 30 s one rarely shows: the decoder does not stop, and
repeats the sentence until its length limit (measured without this guard: 5 of 60 espeak
sentences looped, for a word error rate of 0.72 and 0.97 on FLORES and ACL 60/60 where
the 30 s window had 0.24 and 0.23). So a decode is capped at what the audio can
hold (``TOKENS_PER_S``), and one that reaches the cap or repeats itself (a run of tokens
said twice, or faster-whisper's compression-ratio test) is decoded again over the full
window (``fallback``).
"""

from __future__ import annotations

import math
import zlib
from typing import Any

import numpy as np

from app.speech.agreement import Word
from app.speech.recognizer import Transcriber

FRAMES_PER_SECOND = 100  # Whisper's log-mel hop: 10 ms
MAX_FRAMES = 3000  # the 30 s window the model was trained on
NO_SPEECH_PROB = 0.5  # see _generate
LOW_AVG_LOGPROB = -1.0
PREPEND_PUNCTUATION = "\"'“¿([{-"
APPEND_PUNCTUATION = "\"'.。,，!！?？:：”)]}、"
# Text tokens a second of speech can hold, with room to spare: fast speech is about 4 words
# a second, English about 1.3 tokens a word, numbers more; plus a few for a short buffer
TOKENS_PER_S = 8.0
MIN_TOKENS = 16
MAX_COMPRESSION_RATIO = 2.4  # faster-whisper's default: above it, the text repeats itself
REPEAT_TOKENS = 6  # a run of this many tokens said twice in one buffer is taken for a loop


def repeats_itself(tokens: list[int], text: str) -> bool:
    """A looping decode: some ``REPEAT_TOKENS`` tokens occur twice (a short window's loop
    repeats the sentence once or twice before its cap), or the text compresses too well
    (faster-whisper's test). A speaker who does repeat a phrase costs one more decode over
    the full window, never words."""
    runs = {tuple(tokens[i:i + REPEAT_TOKENS]) for i in range(len(tokens) - REPEAT_TOKENS + 1)}
    if len(runs) < len(tokens) - REPEAT_TOKENS + 1:
        return True
    data = text.encode("utf-8")
    return len(data) > 0 and len(data) / len(zlib.compress(data)) > MAX_COMPRESSION_RATIO


def window_frames(content_frames: int, margin_s: float = 1.0, step_s: float = 1.0) -> int:
    """The encoder's window for ``content_frames`` of audio: the content plus at least
    ``margin_s`` of padding, rounded up to whole ``step_s`` (so a growing buffer reuses a
    few shapes), even (the encoder's convolution halves it), at most 30 s."""
    step = max(2, int(step_s * FRAMES_PER_SECOND))
    wanted = content_frames + int(margin_s * FRAMES_PER_SECOND)
    frames = math.ceil(wanted / step) * step
    frames += frames % 2
    return min(MAX_FRAMES, frames)


class FittedWindowTranscriber:
    """A ``Transcriber`` (``app.speech.recognizer``) over a faster-whisper ``WhisperModel``
    whose encoder sees the buffer plus ``margin_s`` of silence, not 30 s."""

    def __init__(self, model: Any, margin_s: float = 1.0,
                 fallback: Transcriber | None = None) -> None:
        self.model = model
        self.margin_s = margin_s
        self.fallback = fallback  # decodes a buffer again when the fitted decode loops
        self.fallbacks = 0  # how many times it did
        self._tokenizers: dict[str, Any] = {}

    def transcribe(self, audio: np.ndarray, language: str) -> list[Word]:
        if len(audio) > MAX_FRAMES * 160:  # longer than any window: faster-whisper's chunks
            if self.fallback is not None:
                return self.fallback.transcribe(audio, language)
            raise ValueError("a fitted-window decode takes at most 30 s of audio")
        tokenizer = self._tokenizer(language)
        features = self.model.feature_extractor(audio)
        content = features.shape[-1] - 1  # as faster-whisper counts it
        frames = window_frames(content, self.margin_s)
        window = np.zeros((features.shape[0], frames), dtype=np.float32)
        window[:, :min(content, frames)] = features[:, :min(content, frames)]
        encoded = self.model.encode(window)
        cap = MIN_TOKENS + int(TOKENS_PER_S * content / FRAMES_PER_SECOND)
        tokens = self._generate(encoded, tokenizer, cap)
        if tokens is None:  # it looped
            self.fallbacks += 1
            if self.fallback is not None:
                return self.fallback.transcribe(audio, language)
            return []
        if not tokens:
            return []
        return self._words(tokenizer, tokens, encoded, content)

    def _tokenizer(self, language: str) -> Any:
        if language not in self._tokenizers:
            from faster_whisper.tokenizer import Tokenizer

            self._tokenizers[language] = Tokenizer(
                self.model.hf_tokenizer, self.model.model.is_multilingual,
                task="transcribe", language=language)
        return self._tokenizers[language]

    def _generate(self, encoded: Any, tokenizer: Any, cap: int) -> list[int] | None:
        """The decode's text tokens; [] for silence; None when it loops (reaches ``cap``
        tokens without ending, or repeats itself)."""
        from faster_whisper.transcribe import get_suppressed_tokens

        prompt = list(tokenizer.sot_sequence) + [tokenizer.no_timestamps]
        result = self.model.model.generate(
            encoded, [prompt], beam_size=1,
            max_length=min(self.model.max_length, len(prompt) + cap + 1),
            return_scores=True, return_no_speech_prob=True, suppress_blank=True,
            suppress_tokens=get_suppressed_tokens(tokenizer, [-1]))[0]
        tokens = [t for t in result.sequences_ids[0] if t < tokenizer.eot]
        if len(tokens) >= cap or repeats_itself(tokens, tokenizer.decode(tokens)):
            return None
        # faster-whisper's silence test (no-speech probability over a threshold and average
        # log-probability under -1), with the threshold at 0.5, not 0.6: a fitted window
        # makes the model less sure of silence (3 s of zeros: 0.56, in a 30 s window 0.74)
        avg_logprob = result.scores[0] * len(tokens) / (len(tokens) + 1) if tokens else -math.inf
        if result.no_speech_prob > NO_SPEECH_PROB and avg_logprob < LOW_AVG_LOGPROB:
            return []
        return tokens

    def _words(self, tokenizer: Any, tokens: list[int], encoded: Any,
               content: int) -> list[Word]:
        from faster_whisper.transcribe import merge_punctuations

        alignment = self.model.find_alignment(tokenizer, [tokens], encoded, content)[0]
        merge_punctuations(alignment, PREPEND_PUNCTUATION, APPEND_PUNCTUATION)
        return [Word(w["word"], round(float(w["start"]), 2), round(float(w["end"]), 2))
                for w in alignment if w["word"]]
