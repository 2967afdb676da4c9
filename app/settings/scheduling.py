"""How the engine schedules work: the queue, forward passes, drafts in crowded passes,
admission by waiting time, the shutdown's grace.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from app.settings.base import SubsystemSettings, lowercase


class SchedulingSettings(SubsystemSettings):
    """How the engine schedules work."""

    group: ClassVar[str] = "scheduling options"

    queue_size: int = Field(64, ge=1, description="engine jobs waiting before 429")
    step_tokens: int = Field(
        512, ge=16, description="batch rows per forward pass (prompt chunks fill the rest)")
    prefill_chunk: int = Field(
        256, ge=8, description="prompt tokens of one sequence per forward pass, so a long "
                               "prompt cannot hold up finals")
    crowded_proposals: int | None = Field(
        2, ge=0, description="drafter proposals per sequence when several sequences decode "
                             "in one forward pass (a crowded pass costs a full row for each "
                             "rejected one; 2 measured 1.07-1.13x as fast as 6 at 2, 4 and "
                             "8 speakers on 2 cores)")
    crowded_draft: int | None = Field(
        8, ge=0, description="SSBD draft tokens a partial or request verifies per forward pass "
                             "when the pass carries several sequences, the rest part by part "
                             "(finals: --final-draft; rows past a draft's first "
                             "mismatch are thrown away; at 8 speakers on 2 cores 8 measured "
                             "1.16x as fast as the whole draft on the full model, 1.02-1.12x "
                             "on a trimmed one)")
    final_draft: int = Field(
        4, ge=0, description="SSBD draft tokens an unbiased final (final_beta 0, the "
                             "default) verifies per forward pass, the rest part by part "
                             "while it holds (0: the whole draft at once); its draft is the "
                             "last partial, written under the partials' bias, and a final "
                             "keeps a median 1-2 of ~20 of its tokens")
    final_steps: Literal["lead", "alone", "shared"] = Field(
        "lead", description="what forward passes carry besides a running final: 'lead' "
                            "other sequences' next token only, 'alone' nothing, 'shared' "
                            "everything")
    max_queue_wait_s: float = Field(
        5.0, gt=0, description="refuse new requests and live sessions while queued work "
                               "has waited longer than this (seconds)")
    shutdown_grace_s: float = Field(
        30.0, ge=0, description="on shutdown, seconds accepted work (finals first) may "
                                "still take")

    @field_validator("final_steps", mode="before")
    @classmethod
    def _lowercase(cls, value: Any) -> Any:
        return lowercase(value)
