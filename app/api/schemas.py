"""Request and response models, field by field as OpenAI's chat-completions schema.

Extension fields (``target_lang``, ``session_id``, ``beta``...) are those of API.md; the
official SDK sends them through ``extra_body``. Unknown fields are ignored, as OpenAI does
for forward compatibility, but the OpenAI parameters livetrans does not implement
(``UNSUPPORTED_PARAMS``: tools, logprobs, response formats, penalties, ...) are refused by
name with a 400 unless their value asks for nothing (``logprobs: false``): ignored, they
would silently give a client something other than it asked for. Types are strict
(``app.strict_input``), as on the WebSocket.

Every string a request carries must be encodable as UTF-8: JSON can spell a lone UTF-16
surrogate (``"\\ud800"``), Python decodes it into a ``str``, and the first ``encode()``
deep in the tokenizer or the response writer would fail with a 500. ``Text`` rejects it here,
at the edge, as a 400 naming the field. Numbers are bounded where the engine has a domain
(``seed`` >= 0), lists where their length costs work (``drafters``, ``stop``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from app.live.messages import translate_options
from app.strict_input import UNSUPPORTED_PARAMETER, ClientInput
from app.translation.glossary import glossary_field
from app.translation.sessions import MAX_CONTEXT, SESSION_ID_MAX_CHARS, SESSION_ID_PATTERN
from app.translation.translator import DEFAULT_OPTIONS as DEFAULTS
from app.translation.translator import TranslateOptions

# Every translation option's default is ``TranslateOptions``'s; the fields below only say
# which options a request may set and within what bounds.
# beta when a request names none: SSBD's default for a session's own previous translation.
# A client's ``prediction`` is verified with beta 0 instead (latency only, as OpenAI's).
DEFAULT_BETA = DEFAULTS.beta
DEFAULT_PREDICTION_BETA = 0.0
DRAFTER_NAMES = ("previous", "dictionary", "trigram", "ngram")
MAX_STOP_CHARS = 256
SEED_MAX = 2**63 - 1

# pydantic error type of a lone surrogate; ``app.api.errors`` answers it with a 400
INVALID_UNICODE = "invalid_unicode"


def _empty(value: Any) -> bool:
    return value in (None, False, 0, "", [], {})


# OpenAI chat-completion parameters livetrans does not implement, and the values that ask
# for nothing (accepted, so that clients sending defaults keep working).
UNSUPPORTED_PARAMS: dict[str, Callable[[Any], bool]] = {
    "logprobs": _empty,
    "top_logprobs": _empty,
    "tools": _empty,
    "tool_choice": lambda v: v in (None, "none"),
    "parallel_tool_calls": lambda v: v is None or isinstance(v, bool),
    "functions": _empty,
    "function_call": lambda v: v in (None, "none"),
    "response_format": lambda v: v is None or v == {"type": "text"},
    "logit_bias": _empty,
    "presence_penalty": _empty,
    "frequency_penalty": _empty,
    "audio": _empty,
    "modalities": lambda v: v is None or v == ["text"],
    "reasoning_effort": _empty,
    "web_search_options": _empty,
}
# Accepted and ignored (they change nothing a client could observe here): ``user``,
# ``metadata``, ``store``, ``service_tier``, ``prompt_cache_key``, ``safety_identifier``.


def encodable(value: str) -> str:
    """``value`` unchanged if it is valid UTF-8 text; a lone surrogate is a field error."""
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise PydanticCustomError(
                INVALID_UNICODE,
                "text contains a lone UTF-16 surrogate at character {position}, which is "
                "not valid Unicode text",
                {"position": exc.start},
            ) from None
    return value


Text = Annotated[str, AfterValidator(encodable)]
SessionId = Annotated[
    Text, Field(min_length=1, max_length=SESSION_ID_MAX_CHARS, pattern=SESSION_ID_PATTERN)
]


class ContentPart(ClientInput):
    type: Literal["text"]
    text: Text


class ChatMessage(ClientInput):

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: Text | None = None

    @field_validator("content")
    @classmethod
    def _content_encodable(cls, value: str | list[ContentPart] | None):
        # on the field, not the union member: the error names "messages.0.content"
        return encodable(value) if isinstance(value, str) else value

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class StreamOptions(ClientInput):
    include_usage: bool = False


class Prediction(ClientInput):
    type: Literal["content"]
    content: str | list[ContentPart]

    @field_validator("content")
    @classmethod
    def _content_encodable(cls, value: str | list[ContentPart]):
        return encodable(value) if isinstance(value, str) else value

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class ChatCompletionRequest(ClientInput):

    model: Text
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    seed: int | None = Field(None, ge=0, le=SEED_MAX)
    n: int | None = Field(None, ge=1, le=1)
    user: Text | None = None
    prediction: Prediction | None = None

    # livetrans extensions (API.md)
    target_lang: Text | None = Field(None, min_length=2, max_length=8)
    source_lang: Text = Field(DEFAULTS.source_lang, min_length=2, max_length=8)
    session_id: SessionId | None = None
    # the client's update counter for the session (README "Order of updates")
    seq: int | None = Field(None, ge=0, le=SEED_MAX)
    is_final: bool | None = None
    # None: DEFAULT_BETA, or DEFAULT_PREDICTION_BETA with a ``prediction`` (see ``beta_for``)
    beta: float | None = Field(None, ge=0.0, lt=1.0)
    mask_k: int = Field(DEFAULTS.mask_k, ge=0, le=64)
    mask_mode: Literal["display", "draft"] = DEFAULTS.mask_mode
    bias_scope: Literal["all", "agreed"] = DEFAULTS.bias_scope
    # Final policy (README "Faithful finals"): beta of a final update (null: the partials'
    # beta, the SSBD paper's setting), pathological outputs refused as drafts, and one
    # retry from scratch of a pathological final.
    final_beta: float | None = Field(DEFAULTS.final_beta, ge=0.0, lt=1.0)
    draft_guard: bool = DEFAULTS.draft_guard
    final_retry: bool = DEFAULTS.final_retry
    drafters: list[Literal[DRAFTER_NAMES]] | None = Field(None, max_length=len(DRAFTER_NAMES))
    # whole talks (API.md): the organiser's terms, and how many earlier finals to show
    glossary: Annotated[dict[str, str] | None, BeforeValidator(glossary_field)] = None
    context: int = Field(DEFAULTS.context, ge=0, le=MAX_CONTEXT)

    @model_validator(mode="before")
    @classmethod
    def _refuse_unsupported(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, harmless in UNSUPPORTED_PARAMS.items():
                if name in data and not harmless(data[name]):
                    raise PydanticCustomError(
                        UNSUPPORTED_PARAMETER,
                        "'{param}' is not supported by livetrans (a translation server); "
                        "leave it out", {"param": name})
        return data

    @field_validator("stop")
    @classmethod
    def _stops(cls, value: str | list[str] | None) -> str | list[str] | None:
        stops = [value] if isinstance(value, str) else value or []
        if len(stops) > 4:
            raise ValueError("at most 4 stop sequences")
        for stop in stops:
            encodable(stop)
            if len(stop) > MAX_STOP_CHARS:
                raise ValueError(f"a stop sequence has at most {MAX_STOP_CHARS} characters")
        return value

    def beta_for(self) -> float:
        """The beta to verify the draft with: the request's, else the draft source's default.

        A ``prediction`` is a client's guess, and OpenAI's contract is that it changes
        latency only; biased towards it, a wrong guess would leak into the translation.
        """
        if self.beta is not None:
            return self.beta
        return DEFAULT_PREDICTION_BETA if self.prediction is not None else DEFAULT_BETA

    def stop_list(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        stops = [self.stop] if isinstance(self.stop, str) else self.stop
        return tuple(s for s in stops if s)

    def token_limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    def translate_options(self, source_lang: str, target_lang: str,
                          max_tokens: int) -> TranslateOptions:
        """The engine's options for this request (languages already checked,
        ``max_tokens`` already bounded by the server): the one mapping the WebSocket
        ``start`` uses too (``app.live.messages.translate_options``), with what only HTTP
        carries."""
        return translate_options(
            self, source_lang, target_lang, max_tokens, beta=self.beta_for(),
            mask_mode=self.mask_mode, temperature=self.temperature or DEFAULTS.temperature,
            seed=self.seed, stop=self.stop_list())


# -- responses -----------------------------------------------------------------------------
class CompletionTokensDetails(BaseModel):
    accepted_prediction_tokens: int = 0
    rejected_prediction_tokens: int = 0
    reasoning_tokens: int = 0
    audio_tokens: int = 0


class PromptTokensDetails(BaseModel):
    cached_tokens: int = 0
    audio_tokens: int = 0


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails = Field(default_factory=PromptTokensDetails)
    completion_tokens_details: CompletionTokensDetails = Field(
        default_factory=CompletionTokensDetails
    )


class DraftCounts(BaseModel):
    """Draft tokens proposed to the verifier and accepted, by source (``DraftStats``):
    ``"ssbd"`` is the previous translation (or ``prediction``), the others drafter names."""

    proposed: dict[str, int] = Field(default_factory=dict)
    accepted: dict[str, int] = Field(default_factory=dict)


class GlossaryReport(BaseModel):
    applied: int
    missed: list[str]


class LivetransInfo(BaseModel):
    session_id: str | None
    revision: int
    display_text: str
    draft_tokens: int  # every token proposed to the verifier: SSBD draft + drafters
    accepted_tokens: int
    new_tokens: int
    # The SSBD draft alone (the session's previous translation, or ``prediction``).
    ssbd_draft_tokens: int = 0
    ssbd_accepted_tokens: int = 0
    # the counts above by source; the totals and ssbd_* fields stay for old clients
    drafts: DraftCounts = Field(default_factory=DraftCounts)
    forward_passes: int
    decode_ms: float
    is_final: bool = True
    queue_ms: float = 0.0
    # app.translation.pathology: what is wrong with this output ("copy", "wrong_script",
    # "prompt_example", "loop"), why it is no draft for the next update, and whether a
    # final was translated again from scratch (with the first attempt's pathology)
    pathology: str | None = None
    draft_dropped: str | None = None
    retried: str | None = None
    # with a glossary: entries that applied to the source, and the source terms of those
    # whose target term is not in the translation
    glossary: GlossaryReport | None = None
    # where the update's time went inside the server, in ms and row counts
    # (``app.engine.timings.PARTS`` and ``COUNTS``, and their sum ``server_ms``)
    timings: dict[str, float | int] | None = None


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str
    refusal: str | None = None


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: Literal["stop", "length"]
    logprobs: None = None


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage
    system_fingerprint: str | None = None
    livetrans: LivetransInfo | None = None


class Delta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None


class ChunkChoice(BaseModel):
    index: int = 0
    delta: Delta
    finish_reason: Literal["stop", "length"] | None = None
    logprobs: None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: Usage | None = None
    system_fingerprint: str | None = None
    livetrans: LivetransInfo | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "livetrans"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]
