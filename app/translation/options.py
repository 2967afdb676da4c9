"""A translation update's options, grouped by the concern that reads them.

Twenty knobs reach the translator (the HTTP request, the WebSocket ``start``, the eval
harness), but each step of an update reads only a few: the draft step reads the drafting
group, the display step the display group, the repair step the talk's glossary. So the
options are small frozen dataclasses, one per concern, and a step takes the group it needs
(``app.translation.steps``): a change to how finals are retried cannot reach how drafts
are biased by accident, and a step's test builds only its own group.

``TranslateOptions`` stays the flat record every caller builds and reads
(``TranslateOptions(target_lang="de", mask_k=1)``, ``opts.target_lang``,
``dataclasses.replace(opts, context=0)``, ``dataclasses.fields`` for the options-path
test): its defaults come from the groups (one place for each default), and its properties
(``opts.drafting``, ``opts.display``, ...) hand each step its group. ``TranslateOptions.of``
builds one from groups.

``Translator.translate`` takes, besides the source and these options, three small groups
that say how one call runs rather than how the text is translated: ``UpdateSession``
(whose session the update belongs to, and the client's update counter), ``Hints`` (what
the caller already has of the answer: a client's prediction, a stateless request's
context, append-only text's committed tokens) and ``JobControl`` (how the backend runs
the job: priority, cancel, streaming, queue position).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.translation.backend_types import PRIORITY_REQUEST

if TYPE_CHECKING:
    from app.translation.sessions import Session


@dataclass(frozen=True)
class Languages:
    """The pair: which language the source is in and which one the update translates to."""

    source_lang: str = "en"
    target_lang: str = "de"


@dataclass(frozen=True)
class Limits:
    """What the client bounds a generation with: length, sampling, its own stop strings."""

    max_tokens: int = 256
    temperature: float = 0.0
    seed: int | None = None
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class Drafting:
    """How the SSBD draft is verified and extended.

    ``drafters``: None = all available; [] = plain autoregressive. ``unbiased_tail``: no
    bias on sentence-final punctuation ending the draft. ``bias_scope``: "all" biases every
    draft token; "agreed" only the draft's prefix on which the two previous outputs of the
    segment agreed. ``final_beta``: the beta of a final update (None: the same as partials;
    README "Faithful finals"). ``draft_guard``: whether outputs that
    ``app.translation.pathology`` diagnoses are refused as drafts (measured: with unbiased
    finals it costs speed and calm only).
    """

    beta: float = 0.2
    final_beta: float | None = 0.0
    drafters: list[str] | None = None
    draft_budget: int = 6
    unbiased_tail: bool = True
    bias_scope: str = "all"
    draft_guard: bool = False

    def uses(self, name: str) -> bool:
        """Whether the drafter ``name`` is on (all are when none are named)."""
        return self.drafters is None or name in self.drafters

    def beta_for(self, is_final: bool) -> float:
        """The beta an update is verified with: a final uses ``final_beta`` when it is set.

        A final caption is what every viewer keeps; verified with beta 0 it is plain greedy
        decoding (what re-translation from scratch gives, up to near-ties), whatever the
        draft. Partials keep the bias that makes them calm and fast.
        """
        if is_final and self.final_beta is not None:
            return self.final_beta
        return self.beta


@dataclass(frozen=True)
class Display:
    """What the viewer is shown of a partial: ``mask_k`` tokens hidden at its end;
    ``mask_mode`` "display" hides them from the viewer only, "draft" cuts the draft too."""

    mask_k: int = 3
    mask_mode: str = "display"


@dataclass(frozen=True)
class Finals:
    """Whether a pathological final is translated once more, from scratch, with the
    stronger prompt (and cut where its loop starts when it still loops), and a final that
    misses glossary terms repaired (README "Faithful finals"); ``give_up_copies``: a final
    that would be retried stops its first answer as soon as it begins as a copy of the
    source (measured; not a request field: ``livetrans bench finals --versus give-up``)."""

    final_retry: bool = True
    give_up_copies: bool = True


@dataclass(frozen=True)
class Talk:
    """Whole talks (README "Context and glossaries"): how many of the session's previous
    finals the model sees before the source, the organiser's term list, and how a glossary
    is made to hold.

    Two finals of context: on the ACL 60/60 dev talks it raised chrF of finals by 3.1
    [+0.8, +5.4] over none, at about 1.3x the decode time; four raised it more but cost
    1.45x. ``glossary_steps`` (measured; not a request field): entries shown as data in
    the prompt, target terms drafted where the model begins them, a final that misses one
    decoded once more.
    """

    context: int = 2
    glossary: dict[str, str] | None = None
    glossary_steps: tuple[str, ...] = ("prompt", "draft", "repair")


@dataclass(frozen=True)
class Framing:
    """Instruction models (chat-template prompts): the answer ends at a line break once
    begun, and labels, quotes, a restated source and notes are taken off; what framing
    remains is a pathology (``app.translation.framing``). Off only to measure what it does
    (eval's ``+noclean``): framing is then still diagnosed, but neither cut nor retried."""

    clean_framing: bool = True


_L, _M, _D, _S, _F, _T, _C = (Languages(), Limits(), Drafting(), Display(), Finals(),
                              Talk(), Framing())


@dataclass
class TranslateOptions:
    """Every option of one update, flat: what callers build and read. Each default is its
    group's; the properties below are the groups the steps take."""

    source_lang: str = _L.source_lang
    target_lang: str = _L.target_lang
    beta: float = _D.beta
    mask_k: int = _S.mask_k
    mask_mode: str = _S.mask_mode
    drafters: list[str] | None = _D.drafters
    max_tokens: int = _M.max_tokens
    temperature: float = _M.temperature
    seed: int | None = _M.seed
    stop: tuple[str, ...] = _M.stop
    draft_budget: int = _D.draft_budget
    unbiased_tail: bool = _D.unbiased_tail
    bias_scope: str = _D.bias_scope
    final_beta: float | None = _D.final_beta
    draft_guard: bool = _D.draft_guard
    final_retry: bool = _F.final_retry
    give_up_copies: bool = _F.give_up_copies
    context: int = _T.context
    glossary: dict[str, str] | None = _T.glossary
    glossary_steps: tuple[str, ...] = _T.glossary_steps
    clean_framing: bool = _C.clean_framing

    @classmethod
    def of(cls, languages: Languages = _L, limits: Limits = _M, drafting: Drafting = _D,
           display: Display = _S, finals: Finals = _F, talk: Talk = _T,
           framing: Framing = _C) -> TranslateOptions:
        """The options made of their groups (a group left out keeps its defaults)."""
        fields: dict[str, object] = {}
        for group in (languages, limits, drafting, display, finals, talk, framing):
            fields.update(vars(group))
        return cls(**fields)  # type: ignore[arg-type]

    @property
    def languages(self) -> Languages:
        return Languages(self.source_lang, self.target_lang)

    @property
    def limits(self) -> Limits:
        return Limits(self.max_tokens, self.temperature, self.seed, self.stop)

    @property
    def drafting(self) -> Drafting:
        return Drafting(self.beta, self.final_beta, self.drafters, self.draft_budget,
                        self.unbiased_tail, self.bias_scope, self.draft_guard)

    @property
    def display(self) -> Display:
        return Display(self.mask_k, self.mask_mode)

    @property
    def finals(self) -> Finals:
        return Finals(self.final_retry, self.give_up_copies)

    @property
    def talk(self) -> Talk:
        return Talk(self.context, self.glossary, self.glossary_steps)

    @property
    def framing(self) -> Framing:
        return Framing(self.clean_framing)

    def uses(self, name: str) -> bool:
        """Whether the drafter ``name`` is on (``Drafting.uses``)."""
        return self.drafting.uses(name)


# The defaults of every translation option, in one place: the HTTP request, the WebSocket
# ``start`` and the eval harness read theirs from here (``tests/app/test_options_paths.py``).
DEFAULT_OPTIONS = TranslateOptions()


# -- how one call of ``Translator.translate`` runs ------------------------------------------


@dataclass(frozen=True)
class UpdateSession:
    """Whose session an update belongs to (none: a stateless request).

    ``session``: one the caller already holds (the WebSocket owns its session for the
    connection's lifetime); otherwise ``session_id`` is acquired for the call, on behalf of
    ``owner``. ``seq`` is the client's update counter, which the session records as applied
    together with the translation (README "Order of updates").
    """

    session_id: str | None = None
    owner: str | None = None
    session: Session | None = None
    seq: int | None = None

    @property
    def stateless(self) -> bool:
        return self.session is None and self.session_id is None


@dataclass(frozen=True)
class Hints:
    """What the caller already has of the answer and its history.

    ``prediction``: a client's guess of the translation, the draft instead of the
    session's; ``context``: a stateless request's earlier (source, translation) pairs
    (without it, a session's previous finals are the context); ``forced``: tokens the
    answer must start with, an append-only segment's committed text
    (``app.translation.commit_policy``); ``likely_final``: a partial the caller expects
    to be the final's text (heard at a pause in the speech): translated as its final
    will be, captioned as a partial, and kept in the session for that final
    (``app.translation.pause``).
    """

    prediction: str | None = None
    context: list[tuple[str, str]] | None = None
    forced: Sequence[int] = ()
    likely_final: bool = False


@dataclass(frozen=True)
class JobControl:
    """How the backend runs the update's job (``BackendRunner.run``), and its stream.

    ``priority``: the seam's ranks (finals first); ``bypass_limit`` lets a final in when
    the queue is full; ``cancel`` ends the generation; ``started`` is set when it starts;
    ``queue_seq`` (``BackendService.next_seq``) keeps the queue position of a job this one
    supersedes; ``on_text`` receives the answer as it is generated (a streamed update is
    neither retried nor cut).
    """

    priority: int = PRIORITY_REQUEST
    bypass_limit: bool = False
    cancel: threading.Event | None = None
    started: threading.Event | None = None
    queue_seq: int | None = None
    on_text: Callable[[str], None] | None = None
