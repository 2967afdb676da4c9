"""Translating at the speaker's pause: the final's translation, made before the final.

A speech recogniser knows a segment is probably over before it says so: it decodes the
buffer as soon as the speech pauses (``app.speech.whisper_stream``: ``END_PAD_S`` of
silence) and only calls it final after the endpoint's silence (``endpoint_silence_s``),
and that final takes the pause decode's words whole. So the partial heard at a pause has,
unless the speaker goes on, exactly the final's text, and the endpoint's silence (and the
final's own decode, when one is needed) is time in which the translation could already
run.

Such a partial (``Hints.likely_final``) is translated as its final will be: the same
prompt, the final's beta, retries and repairs (``Translator.translate``); its caption is a
partial's (held back and masked as partials are), and the final's outcome is kept in the
session (``PauseTranslation``). When the final comes with the same prompt (same source,
context, glossary and options) it takes that outcome instead of translating again. Greedy
decoding with the final's settings is a function of the prompt (SSBD with beta 0 is
lossless whatever the draft), so the final's caption is the one it would have got, up to
the engine's numeric noise; only the time differs. Nothing else changes: a speaker who
goes on makes the kept outcome stale, and the next final translates as before.

Append-only text (``Hints.forced``) may commit more of the segment between the pause and
the final; the kept outcome still serves when the final's forced start extends the pause
translation's and is a start of its answer (the answer is then what forcing it again
would give). A retried or repaired outcome serves only for the same forced start.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from app.translation.backend import TranslationBackend
from app.translation.steps.display import caption_step
from app.translation.steps.request import UpdateOutcome, UpdateRequest


def request_key(request: UpdateRequest) -> tuple[object, ...]:
    """What decides a final's answer, apart from its forced start: the prompt (source,
    context, examples), the options and the glossary's terms."""
    return (request.prompt, request.options, tuple(request.terms))


@dataclass(frozen=True)
class PauseTranslation:
    """A final's outcome, translated at the pause before it."""

    key: tuple[object, ...]
    forced: tuple[int, ...]
    outcome: UpdateOutcome

    def serves(self, request: UpdateRequest) -> bool:
        """Whether ``request`` (a final) would be answered with this outcome."""
        if request_key(request) != self.key:
            return False
        forced = tuple(request.forced)
        if forced == self.forced:
            return True
        if self.outcome.retried is not None or self.outcome.cut or request.terms:
            return False  # another attempt, a cut or a glossary's repair: the same start
        answer = tuple(self.outcome.result.tokens)
        return forced[: len(self.forced)] == self.forced and answer[: len(forced)] == forced


def keep(request: UpdateRequest, outcome: UpdateOutcome) -> PauseTranslation | None:
    """The pause translation ``request`` made (``outcome``, the final's), or None when it
    cannot serve a final (cancelled)."""
    if outcome.result.finish_reason == "cancelled":
        return None
    return PauseTranslation(request_key(request), tuple(request.forced), outcome)


def as_partial(backend: TranslationBackend, request: UpdateRequest,
               outcome: UpdateOutcome) -> UpdateOutcome:
    """``outcome`` (translated as a final) captioned as the partial it is: framing held
    back and the display mask applied as for any partial (the display step)."""
    caption = caption_step(backend, dataclasses.replace(request, is_final=False),
                           outcome.result)
    return dataclasses.replace(outcome, display=caption.display, caption=caption.text,
                               shown_tokens=caption.text_tokens)
