"""Request and response models, field by field as OpenAI's chat-completions schema.

Extension fields (``target_lang``, ``session_id``, ``beta``...) are those of API.md; the
official SDK sends them through ``extra_body``. Unknown fields are ignored, as OpenAI does
for forward compatibility.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class ContentPart(BaseModel):
    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = None

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class StreamOptions(BaseModel):
    include_usage: bool = False


class Prediction(BaseModel):
    type: Literal["content"]
    content: str | list[ContentPart]

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    seed: int | None = None
    n: int | None = Field(None, ge=1, le=1)
    user: str | None = None
    prediction: Prediction | None = None

    # livetrans extensions (API.md)
    target_lang: str | None = Field(None, min_length=2, max_length=8)
    source_lang: str = Field("en", min_length=2, max_length=8)
    session_id: str | None = Field(None, min_length=1, max_length=128)
    is_final: bool | None = None
    beta: float = Field(0.2, ge=0.0, lt=1.0)
    mask_k: int = Field(3, ge=0, le=64)
    mask_mode: Literal["display", "draft"] = "display"
    bias_scope: Literal["all", "agreed"] = "all"
    drafters: list[Literal["previous", "dictionary", "trigram", "ngram"]] | None = None

    @field_validator("stop")
    @classmethod
    def _stops(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list) and len(value) > 4:
            raise ValueError("at most 4 stop sequences")
        return value

    def stop_list(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        stops = [self.stop] if isinstance(self.stop, str) else self.stop
        return tuple(s for s in stops if s)

    def token_limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


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
    forward_passes: int
    decode_ms: float
    is_final: bool = True
    queue_ms: float = 0.0


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
