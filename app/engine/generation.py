"""What a generation is asked to do and what it returns: the engine's data types.

Separate from the engine and the per-sequence state machine so that both, and every caller,
import them from one place.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from app.engine.draft_stats import DraftStats
from drafters.base import DraftContext


class ContextOverflowError(ValueError):
    """The prompt does not fit into the context window."""


class ProposalSource(Protocol):
    """What the engine needs from a drafter chain (see ``drafters.chain``)."""

    def propose_from(self, ctx: DraftContext, k: int):  # -> object with .tokens, .source
        ...


@dataclass
class GenerationRequest:
    prompt_tokens: list[int]
    max_tokens: int = 256
    stop_strings: tuple[str, ...] = ()
    # a client's ``stop``: like ``stop_strings``, but never matched inside the output's
    # leading whitespace (``stop: [" "]`` would otherwise end every answer before its
    # first word, since outputs start with a space)
    client_stops: tuple[str, ...] = ()
    # stops that end an answer once it has begun: matched only after text that is not a
    # lead-in (empty, or a label line ending with a colon, "Here is the translation:");
    # an instruction model's blank line (``app.translation.framing``)
    answer_stops: tuple[str, ...] = ()
    # whether the text before an answer stop holds an answer (None: text that is neither
    # empty nor ends with a colon); the translator's knows lead-ins by their words
    answer_begun: Callable[[str], bool] | None = None
    draft: Sequence[int] = ()  # SSBD draft: the previous translation's tokens
    beta: float = 0.0
    bias_limit: int | None = None  # draft positions >= this are verified without bias
    temperature: float = 0.0
    seed: int | None = None
    drafters: ProposalSource | None = None  # proposals for tokens past the draft
    # the bias a drafter's proposals are verified with, by its name (default 0: plain
    # greedy); a glossary's terms are verified with one (``drafters.glossary``)
    drafter_beta: Mapping[str, float] = field(default_factory=dict)
    draft_budget: int = 6
    previous: Sequence[int] = ()  # the session's previous output, for the "previous" drafter
    stop_on_loop: bool = False  # end when the output repeats one span three times in a row
    # asked with the output's complete words each time a token begins a new word: a reason
    # (e.g. "copy") ends the generation there as given up (``GenerationResult.gave_up``),
    # an answer that is already no translation and that its caller will translate again
    give_up: Callable[[str], str | None] | None = None
    # which tokens may begin the output (None: any): after a forced prefix of whole words
    # (append-only text, ``app.translation.commit_policy``) one that begins a new word, so
    # a committed word is never extended ("Hund" + "es")
    first_token: Callable[[int], bool] | None = None
    cancel: threading.Event | None = None
    on_text: Callable[[str], None] | None = None
    # no later prompt extends this one (a final's retry, with a prompt of its own): it takes
    # the least recently used free sequence instead of the one caching most of its prompt,
    # which is its session's, whose next update extends it (``KvSlots.acquire``)
    one_off: bool = False


@dataclass
class GenerationResult:
    tokens: list[int]
    text: str
    finish_reason: str  # "stop" | "length" | "cancelled"
    prompt_tokens: int
    prompt_tokens_cached: int
    drafts: DraftStats = field(default_factory=DraftStats)  # proposed/accepted by source
    forward_passes: int = 0
    decode_ms: float = 0.0
    prompt_ms: float = 0.0  # until the pass that verified the SSBD draft
    lse_computed: int = 0
    looped: bool = False  # ended by the loop detector
    gave_up: str | None = None  # why ``GenerationRequest.give_up`` ended it, if it did
    queue_ms: float = 0.0  # waiting for a sequence (and after a preemption, again)
    preemptions: int = 0  # times a higher-priority sequence took this one's place

    # Read-only views of ``drafts`` under the names the API has always used.
    @property
    def draft_tokens(self) -> int:
        return self.drafts.total_proposed

    @property
    def accepted_tokens(self) -> int:
        return self.drafts.total_accepted

    @property
    def ssbd_draft_tokens(self) -> int:
        return self.drafts.ssbd_proposed

    @property
    def ssbd_accepted_tokens(self) -> int:
        return self.drafts.ssbd_accepted

    @property
    def new_tokens(self) -> int:
        return len(self.tokens) - self.accepted_tokens

    @property
    def runaway(self) -> bool:
        """Cut off rather than finished: hit the token cap or fell into a loop."""
        return self.looped or self.finish_reason == "length"
