"""Methods an evaluation compares, and how one update stream is run with each.

Every method goes through ``app.translation.translator.run_update``, the server's own code
path:

* ``ar``: re-translation from scratch (prompt prefix cache on, no draft, no drafters);
* ``ssbd-b<beta>``: the previous update's translation as the draft, verified with beta;
  flags after ``+``: ``draftmask<k>`` (draft mask-k: the draft loses its last k tokens),
  ``drafters`` (the drafter chain proposes tokens past the draft), ``stopdraft`` (the
  previous output's stop token kept at the draft's end and biased: the failure mode this
  project avoids), ``biastail`` (bias draft-final punctuation too), ``agreed`` (bias only
  the draft prefix on which the two previous outputs agreed), ``noclean`` (an instruction
  model's framing is counted but neither cut nor retried: what captions showed before
  ``app.translation.framing``).

The final policy (README "Faithful finals") is the server's default unless flags say
otherwise: ``biasedfinal`` (finals verified with the partials' beta, the SSBD paper's
setting), ``noguard`` (pathological outputs stay drafts), ``noretry`` (a pathological final
is not translated again). ``ssbd-b0.2+biasedfinal+noguard+noretry`` is SSBD as it was.
AR never has a draft and, as the baseline, no retry (``ar+retry`` measures what the retry
alone does).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from app.engine.engine import Engine
from app.translation.backend import run_to_end
from app.translation.llama_backend import StandaloneLlamaBackend
from app.translation.pathology import fit_for_context
from app.translation.prompts import PromptFormat
from app.translation.sessions import DraftPlan, Session
from app.translation.translator import (
    DEFAULT_OPTIONS,
    TranslateOptions,
    UpdateOutcome,
    masked_tokens,
    plan_prompt,
    run_update,
)
from eval.datasets.streams import Stream


@dataclass(frozen=True)
class Method:
    """One method of a run, parsed from its name once (``parse_method``): the report reads
    ``beta`` and ``flags`` from here, never from the name."""

    name: str
    beta: float | None  # None = AR (no draft)
    flags: tuple[str, ...] = ()  # the name's ``+flag`` parts, in order
    stop_draft: bool = False
    unbiased_tail: bool = DEFAULT_OPTIONS.unbiased_tail
    draft_mask_k: int = 0
    drafters: bool = False
    temperature: float = DEFAULT_OPTIONS.temperature
    bias_scope: str = DEFAULT_OPTIONS.bias_scope
    final_beta: float | None = DEFAULT_OPTIONS.final_beta
    draft_guard: bool = DEFAULT_OPTIONS.draft_guard
    final_retry: bool = DEFAULT_OPTIONS.final_retry
    model: str = ""  # ``@NAME``: run on the model ``--compare-model NAME=PATH`` names
    # whole talks: ``ctx<N>`` (earlier finals shown; None: the run's ``--context``) and
    # ``gloss`` / ``nogloss`` (use the run's ``--glossary`` or not; None: use it if given)
    context: int | None = None
    glossary: bool | None = None
    glossary_steps: tuple[str, ...] = DEFAULT_OPTIONS.glossary_steps
    clean_framing: bool = DEFAULT_OPTIONS.clean_framing

    @property
    def is_ar(self) -> bool:
        return self.beta is None


# method flags -> the Method fields they set (see the module docstring)
_FLAGS: dict[str, dict] = {
    "stopdraft": {"stop_draft": True, "unbiased_tail": False},
    "biastail": {"unbiased_tail": False},
    "drafters": {"drafters": True},
    "agreed": {"bias_scope": "agreed"},
    "biasedfinal": {"final_beta": None},
    "noguard": {"draft_guard": False},
    "guard": {"draft_guard": True},
    "noretry": {"final_retry": False},
    "retry": {"final_retry": True},
    "gloss": {"glossary": True},
    "nogloss": {"glossary": False},
    # how the glossary is made to hold (``TranslateOptions.glossary_steps``)
    "glprompt": {"glossary_steps": ("prompt",)},
    "gldraft": {"glossary_steps": ("prompt", "draft")},
    "glnoprompt": {"glossary_steps": ("draft", "repair")},
    # an instruction model's framing neither cut nor retried, only counted
    "noclean": {"clean_framing": False},
}


def parse_method(item: str) -> Method:
    """``ssbd-b0.2+drafters@de``: a method, its flags, and the model label after ``@``."""
    item = item.strip()
    spec, _, model = item.partition("@")
    m = _parse_spec(spec, item)
    return replace(m, model=model) if model else m


def _parse_spec(spec: str, item: str) -> Method:
    base, *flags = spec.split("+")
    if base == "ar":  # re-translation from scratch, as any server does it: no retry either
        m = Method(item, None, tuple(flags), final_retry=False)
    elif base.startswith("ssbd-b"):
        m = Method(item, float(base[len("ssbd-b"):]), tuple(flags))
    else:
        raise ValueError(f"unknown method {item!r} (ar, ssbd-b0.2, ssbd-b0.2+drafters, ...)")
    for flag in flags:
        if flag in _FLAGS:
            m = replace(m, **_FLAGS[flag])
        elif flag.startswith("draftmask"):
            m = replace(m, draft_mask_k=int(flag[len("draftmask"):]))
        elif flag.startswith("finalb"):
            m = replace(m, final_beta=float(flag[len("finalb"):]))
        elif flag.startswith("ctx") and flag[3:].isdigit():
            m = replace(m, context=int(flag[3:]))
        else:
            raise ValueError(f"unknown method flag {flag!r}")
    return m


def parse_methods(spec: str) -> list[Method]:
    return [parse_method(x) for x in spec.split(",") if x.strip()]


@dataclass(frozen=True)
class TalkSettings:
    """What a run gives every method about whole talks: the default context (``--context``),
    the glossary of the stream's talk (``--glossary``) and the server's context bound."""

    context: int = DEFAULT_OPTIONS.context
    glossary: dict[str, str] | None = None
    max_context_chars: int = 2000


def run_stream(engine: Engine, fmt: PromptFormat, method: Method, stream: Stream,
               src_lang: str, tgt_lang: str, chain: object | None, newline_token: int,
               max_tokens: int = 256, seed: int | None = None,
               session: Session | None = None,
               talk: TalkSettings = TalkSettings()) -> list[dict]:
    """Translate every update of one stream with one method; one record per update.

    The stream is one ``Session``, as on the server: its ``plan_draft`` is every update's
    draft (AR ignores it) and ``commit`` makes the output the next one (a final ends the
    segment), so the harness measures the server's draft lifecycle, not a copy of it. A
    talk's streams share one ``session`` (its finals are the next streams' context); the
    prompt is made by ``plan_prompt``, as the server makes it.
    """
    session = session or Session(session_id=f"eval-{stream.id}")
    records = []
    for i, update in enumerate(stream.updates):
        opts = options_for(method, src_lang, tgt_lang, max_tokens,
                           None if seed is None else seed + i, talk)
        plan = DraftPlan() if method.is_ar else session.plan_draft(tgt_lang, src_lang)
        prompt = plan_prompt(fmt, update.source, opts,
                             session.context(tgt_lang, src_lang, opts.context),
                             update.is_final, talk.max_context_chars)
        out = run_to_end(run_update(
            StandaloneLlamaBackend(engine), prompt.prompt, opts, update.is_final,
            draft_tokens=plan.tokens,
            chain=chain if method.drafters else None,
            extra_draft=[newline_token] if (method.stop_draft and plan.tokens) else None,
            draft_agreed=plan.agreed, examples=prompt.examples, retry_prompt=prompt.retry,
            terms=prompt.terms, term_prompt=prompt.term_prompt,
        ))
        session.commit(update.source, out.draft, update.is_final, tgt_lang, src_lang, seq=i,
                       text=out.result.text.strip() if fit_for_context(out.pathology) else None)
        records.append({"update": i, "source": update.source,
                        "read": len(update.source.split()), "t": update.t,
                        "final": update.is_final, **update_record(out),
                        "glossary": None if opts.glossary is None else {
                            "applied": len(out.terms), "missed": out.missed}})
    return records


def options_for(method: Method, src_lang: str, tgt_lang: str, max_tokens: int,
                seed: int | None = None, talk: TalkSettings = TalkSettings()) -> TranslateOptions:
    """The one mapping from an eval method to the engine's options for one update."""
    use_glossary = method.glossary if method.glossary is not None else True
    return TranslateOptions(
        source_lang=src_lang, target_lang=tgt_lang, beta=method.beta or 0.0,
        mask_k=method.draft_mask_k, mask_mode="draft" if method.draft_mask_k else "display",
        unbiased_tail=method.unbiased_tail, max_tokens=max_tokens,
        temperature=method.temperature, seed=seed,
        bias_scope=method.bias_scope, final_beta=method.final_beta,
        draft_guard=method.draft_guard, final_retry=method.final_retry,
        context=talk.context if method.context is None else method.context,
        glossary=talk.glossary if use_glossary else None,
        glossary_steps=method.glossary_steps, clean_framing=method.clean_framing,
    )


class NotOverHttp(ValueError):
    """A method whose options the HTTP API cannot carry (``eval --server`` refuses it)."""


def http_fields(method: Method, src_lang: str, tgt_lang: str, max_tokens: int,
                display_mask_k: int, drafters: list[str] | None,
                talk: TalkSettings = TalkSettings()) -> dict:
    """The chat-completions fields (API.md) that make a server translate an update with
    ``method``'s options: the same ``options_for`` the in-process runner uses, spelled as
    HTTP. ``drafters``: the run's drafters after "previous" (None: the server's default).

    Options the API has no field for (the unbiased draft tail, the stop-draft newline) are
    refused by name rather than dropped: dropped, ``eval --server`` measured plain SSBD under
    those methods' names."""
    opts = options_for(method, src_lang, tgt_lang, max_tokens, talk=talk)
    missing = []
    if opts.unbiased_tail != DEFAULT_OPTIONS.unbiased_tail and not method.stop_draft:
        missing.append("biastail (the draft tail's bias)")
    if method.stop_draft:
        missing.append("stopdraft (the newline after the draft)")
    if not opts.clean_framing:
        missing.append("noclean (framing left on an instruction model's answer)")
    if opts.glossary_steps != DEFAULT_OPTIONS.glossary_steps:
        missing.append("glprompt/gldraft/glnoprompt (how a glossary is enforced)")
    if missing:
        raise NotOverHttp(f"{method.name}: the HTTP API has no field for "
                          f"{' or '.join(missing)}; run it in process (without --server)")
    fields = {"source_lang": opts.source_lang, "target_lang": opts.target_lang,
              "beta": opts.beta, "mask_mode": opts.mask_mode,
              "mask_k": opts.mask_k if opts.mask_mode == "draft" else display_mask_k,
              "bias_scope": opts.bias_scope, "final_beta": opts.final_beta,
              "draft_guard": opts.draft_guard, "final_retry": opts.final_retry,
              "temperature": opts.temperature, "max_tokens": opts.max_tokens,
              "context": opts.context}
    if opts.glossary is not None:
        fields["glossary"] = opts.glossary
    if method.is_ar:
        fields["drafters"] = []
    elif not method.drafters:
        fields["drafters"] = ["previous"]
    elif drafters:
        fields["drafters"] = ["previous", *drafters]
    return fields


def update_record(out: UpdateOutcome) -> dict:
    """What one translated update contributes to its eval record.

    Draft counts come from ``result.drafts`` alone: ``drafts`` is its JSON shape (proposed /
    accepted by source, as in the ``livetrans`` object), and ``drafted`` / ``accepted`` /
    ``ssbd_*`` / ``by_drafter`` are views of it that the metrics and older reports read.
    """
    result, drafts = out.result, out.result.drafts
    counts = drafts.summary(len(result.tokens))  # as the ``livetrans`` object has them
    return {
        # the caption's tokens (an instruction model's answer without its framing)
        "text": result.text.strip(), "token_ids": list(out.shown_tokens),
        "tokens": len(result.tokens),
        "drafted": counts["draft_tokens"], "accepted": counts["accepted_tokens"],
        "ssbd_drafted": counts["ssbd_draft_tokens"],
        "ssbd_accepted": counts["ssbd_accepted_tokens"],
        "by_drafter": drafts.drafters(), "drafts": counts["drafts"],
        "forward_passes": result.forward_passes, "prompt_tokens": result.prompt_tokens,
        "prompt_tokens_cached": result.prompt_tokens_cached,
        "decode_ms": round(result.decode_ms, 3), "prompt_ms": round(result.prompt_ms, 3),
        "finish": result.finish_reason, "pathology": out.pathology,
        "retried": out.retried, "retry_ms": round(out.retry_ms, 3),
        "draft_dropped": out.dropped,
    }


def display_texts(records: list[dict], mask_k: int, detokenize) -> list[str]:  # noqa: ANN001
    """What a viewer saw at each update with display-only mask-k."""
    return [
        r["text"] if r["final"] else detokenize(masked_tokens(r["token_ids"], mask_k, False))
        .strip()
        for r in records
    ]
