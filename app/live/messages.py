"""Client messages of the live socket, validated at the edge.

Anything the translation path cannot use is refused here, with an error frame, before it
becomes state: an unknown drafter name accepted at ``start`` used to fail every later
update (finals included) with ``internal_error``. Validation is strict, by the same rule
as HTTP's (``app.strict_input``: no ``"3"`` for 3, no ``true`` for 1), with no NaN,
and every refusal says which field (``param``) and, for text messages, which segment it
concerns.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, PrivateAttr, ValidationError

from app.live.frames import safe_echo, unencodable
from app.live.outputs.allow import HostPolicy
from app.live.outputs.config import OutputError, OutputSpec, parse_outputs
from app.rooms.registry import ROOM_MAX_CHARS, valid_room
from app.strict_input import ClientInput
from app.translation.glossary import glossary_field
from app.translation.prompts import LANGUAGE_NAMES, UnsupportedLanguageError, check_language
from app.translation.sessions import MAX_CONTEXT
from app.translation.translator import DEFAULT_OPTIONS as DEFAULTS
from app.translation.translator import TranslateOptions

DRAFTER_NAMES = ("previous", "ngram", "dictionary", "trigram")  # drafters.chain.DEFAULT_ORDER
MAX_SEGMENT = 2**53 - 1  # the largest integer a JavaScript client can hold exactly
MAX_NAME_CHARS = 16  # language codes, drafter names, modes
# Each target language is one more sequence in every forward pass of the talk: a handful is
# what an event needs, and the bound keeps one speaker from taking the whole engine.
MAX_TARGET_LANGS = 5
# PCM rates a client may send; the server resamples to the recogniser's 16 kHz
MIN_SAMPLE_RATE, MAX_SAMPLE_RATE, DEFAULT_SAMPLE_RATE = 8000, 48000, 16000

Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS)]


def translate_options(request: Any, source_lang: str, target_lang: str, max_tokens: int,
                      **path_only: Any) -> TranslateOptions:
    """The one mapping from a client's request to the engine's options, for the WebSocket
    ``start`` (one target language of it) and the HTTP chat request
    (``app.api.schemas``) alike: the options both carry are read from ``request`` by the
    same names; ``path_only`` are those one path alone carries or computes (the
    request's ``beta``; HTTP's ``mask_mode``, ``temperature``, ``seed``, ``stop``)."""
    drafters = request.drafters
    return TranslateOptions(
        source_lang=source_lang, target_lang=target_lang, max_tokens=max_tokens,
        mask_k=request.mask_k, bias_scope=request.bias_scope, final_beta=request.final_beta,
        draft_guard=request.draft_guard, final_retry=request.final_retry,
        drafters=list(drafters) if drafters is not None else None,
        context=request.context, glossary=request.glossary, **path_only)


class StartMessage(ClientInput):

    type: Literal["start"]
    target_lang: Name | None = None
    # fan-out (API.md "Events"): several targets instead of ``target_lang``
    target_langs: list[Name] | None = Field(None, min_length=1, max_length=MAX_TARGET_LANGS)
    source_lang: Name = DEFAULTS.source_lang
    display_mode: Literal["mask-k", "stable"] = "mask-k"
    # API.md "Append-only text and voices": "append" adds ``commit`` frames whose text only
    # ever extends (``app.translation.commit_policy``); "replace" is plain re-translation
    display: Literal["replace", "append"] = "replace"
    # API.md "Voices": target languages whose committed text is spoken (binary frames)
    voices: list[Name] | None = Field(None, max_length=MAX_TARGET_LANGS)
    _voice_langs: list[str] = PrivateAttr(default_factory=list)
    room: str | None = Field(None, min_length=1, max_length=ROOM_MAX_CHARS)
    beta: float = Field(DEFAULTS.beta, ge=0.0, lt=1.0, allow_inf_nan=False)
    mask_k: int = Field(DEFAULTS.mask_k, ge=0, le=64)
    drafters: list[Literal["previous", "ngram", "dictionary", "trigram"]] | None = Field(
        None, max_length=len(DRAFTER_NAMES))
    bias_scope: Literal["all", "agreed"] = DEFAULTS.bias_scope
    # final policy, as in the chat request (README "Faithful finals")
    final_beta: float | None = Field(DEFAULTS.final_beta, ge=0.0, lt=1.0,
                                     allow_inf_nan=False)
    draft_guard: bool = DEFAULTS.draft_guard
    final_retry: bool = DEFAULTS.final_retry
    # speech in (API.md "Speech in"): binary PCM frames instead of partial / final
    input: Literal["text", "audio"] = "text"
    sample_rate: int | None = Field(None, ge=MIN_SAMPLE_RATE, le=MAX_SAMPLE_RATE)
    # whole talks (API.md): the organiser's terms, and how many earlier finals to show
    glossary: Annotated[dict[str, str] | None, BeforeValidator(glossary_field)] = None
    context: int = Field(DEFAULTS.context, ge=0, le=MAX_CONTEXT)
    # pushes (API.md "Pushes"): checked by ``parse_start_targets`` (``app.live.outputs``)
    outputs: list[Any] | None = None
    _pushes: list[OutputSpec] = PrivateAttr(default_factory=list)

    @property
    def voice_langs(self) -> list[str]:
        """The checked ``voices`` (``parse_start_targets``): normalised target languages."""
        return self._voice_langs

    @property
    def pushes(self) -> list[OutputSpec]:
        """The checked ``outputs`` (``parse_start_targets`` fills them in)."""
        return self._pushes

    def translate_options(self, source_lang: str, target_lang: str,
                          max_tokens: int) -> TranslateOptions:
        """The engine's options for one of the start's target languages (the server's
        ``--max-new-tokens`` bounds each update): the one mapping, ``translate_options``."""
        return translate_options(self, source_lang, target_lang, max_tokens, beta=self.beta)


class TextMessage(ClientInput):

    type: Literal["partial", "final"]
    segment: int = Field(ge=0, le=MAX_SEGMENT)
    text: str


class Refusal(Exception):
    """A message the server will not act on; becomes one error frame."""

    def __init__(self, code: str, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.param = param


# pydantic error locations -> the error code a client can branch on
_CODES = {"drafters": "unknown_drafter", "bias_scope": "unknown_mode",
          "display_mode": "unknown_mode", "display": "unknown_mode"}


def _refusal(exc: ValidationError) -> Refusal:
    err = exc.errors(include_url=False, include_input=False)[0]
    loc = [str(p) for p in err.get("loc", ())]
    param = safe_echo(loc[0]) if loc else None
    where = safe_echo(".".join(loc))
    text = str(err.get("msg", "")).removeprefix("Value error, ")  # pydantic's prefix
    message = f"{where}: {safe_echo(text, 200)}" if where else safe_echo(text)
    literal = err.get("type") == "literal_error"
    code = _CODES.get(loc[0], "invalid_message") if loc and literal else "invalid_message"
    if loc and loc[0] == "sample_rate":
        code = "unsupported_sample_rate"
    return Refusal(code, message, param)


def parse_start_targets(msg: dict[str, Any], output_hosts: HostPolicy | None = None,
                        ) -> tuple[StartMessage, list[str], str]:
    """A valid ``start``, its normalised target languages (one or more, in the client's
    order, no repeats) and source language, or ``Refusal``. Its ``outputs`` are checked
    against ``output_hosts`` (the operator's ``--output-allow-host``; none: no host) and
    land in ``start.pushes``."""
    try:
        start = StartMessage.model_validate(msg)
        if start.drafters is not None and len(set(start.drafters)) != len(start.drafters):
            raise Refusal("invalid_message", "drafters: each drafter at most once", "drafters")
        if (start.target_lang is None) == (start.target_langs is None):
            param = "target_lang" if start.target_lang is None else "target_langs"
            raise Refusal("invalid_message", "give either target_lang or target_langs "
                          f"(a list of at most {MAX_TARGET_LANGS})", param)
        if start.target_langs is not None:
            targets = [check_language(t, "target_langs") for t in start.target_langs]
            if len(set(targets)) != len(targets):
                raise Refusal("invalid_message", "target_langs: each language at most once",
                              "target_langs")
        else:
            targets = [check_language(start.target_lang or "", "target_lang")]
        source = check_language(start.source_lang, "source_lang")
        if start.sample_rate is not None and start.input != "audio":
            raise Refusal("invalid_message", "sample_rate: only with \"input\": \"audio\"",
                          "sample_rate")
        if start.room is not None and not valid_room(start.room):
            raise Refusal("invalid_room", f"room '{safe_echo(start.room, ROOM_MAX_CHARS)}': "
                          f"1-{ROOM_MAX_CHARS} characters of A-Z a-z 0-9 . _ -, starting with "
                          "a letter or digit", "room")
        if start.voices:
            start._voice_langs = _voice_langs(start, targets)
        if start.outputs:
            if start.room is None:
                raise Refusal("invalid_message", "outputs: pushes are a room's: give a "
                              "\"room\" too", "outputs")
            start._pushes = parse_outputs(start.outputs, targets,
                                          output_hosts or HostPolicy())
    except OutputError as exc:
        raise Refusal(exc.code, exc.message, exc.param) from None
    except ValidationError as exc:
        raise _refusal(exc) from None
    except UnsupportedLanguageError as exc:
        raise Refusal("unsupported_language",
                      f"{exc.param}: unsupported language '{safe_echo(exc.code, MAX_NAME_CHARS)}'"
                      f"; supported: {', '.join(sorted(LANGUAGE_NAMES))}", exc.param) from None
    return start, targets, source


def _voice_langs(start: StartMessage, targets: list[str]) -> list[str]:
    """``start``'s ``voices``: each one of its target languages, at most once, with
    ``"display": "append"`` (a voice speaks committed text)."""
    langs = [check_language(v, "voices") for v in start.voices or []]
    if len(set(langs)) != len(langs):
        raise Refusal("invalid_message", "voices: each language at most once", "voices")
    for lang in langs:
        if lang not in targets:
            raise Refusal("invalid_message", f"voices: '{lang}' is not one of the target "
                          f"languages ({', '.join(targets)})", "voices")
    if start.display != "append":
        raise Refusal("invalid_message", "voices: a voice speaks committed text; start with "
                      "\"display\": \"append\" too", "voices")
    return langs


def segment_of(msg: dict[str, Any]) -> int | None:
    """The message's segment if it names a valid one, so that even a refusal of a malformed
    message can say which segment it concerns; None if it names none."""
    seg = msg.get("segment")
    if type(seg) is int and 0 <= seg <= MAX_SEGMENT:
        return seg
    return None


def parse_text(msg: dict[str, Any], max_chars: int) -> TextMessage:
    """A valid ``partial`` / ``final``, or ``Refusal``."""
    try:
        m = TextMessage.model_validate(msg)
    except ValidationError as exc:
        raise _refusal(exc) from None
    if len(m.text) > max_chars:
        raise Refusal("too_large", f"text of {len(m.text)} characters; the limit is "
                                   f"{max_chars}", "text")
    if unencodable(m.text):
        raise Refusal("invalid_text", "text holds a lone UTF-16 surrogate (not Unicode text)",
                      "text")
    return m


_SNIFF_SEGMENT = re.compile(r'"segment"\s*:\s*(\d{1,16})\s*[,}]')
_SNIFF_FINAL = re.compile(r'"type"\s*:\s*"final"')


def sniff_segment(raw: str) -> tuple[int | None, bool]:
    """Best-effort (segment, is_final) of a frame too large to parse, so that its refusal
    can still name the segment a client is waiting on."""
    m = _SNIFF_SEGMENT.search(raw)
    segment = int(m.group(1)) if m else None
    if segment is not None and segment > MAX_SEGMENT:
        segment = None
    return segment, bool(_SNIFF_FINAL.search(raw))
