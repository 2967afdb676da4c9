"""Method names -> methods: the final-policy flags the faithful-finals comparison uses."""

from __future__ import annotations

import pytest

from app.translation.prompts import FewShotFormat
from app.translation.translator import TranslateOptions
from eval.datasets.streams import Stream, Update
from eval.methods import parse_method, run_stream


def test_default_ssbd_method_is_the_servers_final_policy() -> None:
    m = parse_method("ssbd-b0.2")
    defaults = TranslateOptions()
    assert (m.final_beta, m.draft_guard, m.final_retry) == (
        defaults.final_beta, defaults.draft_guard, defaults.final_retry)


def test_policy_flags() -> None:
    old = parse_method("ssbd-b0.2+biasedfinal+noguard+noretry")
    assert (old.final_beta, old.draft_guard, old.final_retry) == (None, False, False)
    assert parse_method("ssbd-b0.2+finalb0.1").final_beta == 0.1
    assert parse_method("ssbd-b0.2+guard").draft_guard
    assert not parse_method("ar").final_retry and parse_method("ar+retry").final_retry
    assert parse_method("ssbd-b0.2+draftmask3").draft_mask_k == 3
    # an instruction model's framing left on, only counted (docs/instruct-models.md)
    assert parse_method("ar").clean_framing and not parse_method("ar+noclean").clean_framing
    with pytest.raises(ValueError):
        parse_method("ssbd-b0.2+nonsense")


def test_run_stream_drives_a_session_and_records_draft_stats(engine) -> None:
    """The harness's drafts are the session's: each output is the next update's draft, a
    final ends the segment (as on the server), and records carry ``result.drafts``."""
    stream = Stream("s", [Update("The committee met", False),
                          Update("The committee met on Tuesday.", True),
                          Update("Thank you", False)])
    newline = engine.rt.tokenize("\n")[-1]
    recs = run_stream(engine, FewShotFormat(), parse_method("ssbd-b0.2"), stream, "en", "de",
                      None, newline, max_tokens=32)
    assert recs[0]["ssbd_drafted"] == 0
    assert recs[1]["ssbd_drafted"] == (0 if recs[0]["draft_dropped"] else recs[0]["tokens"])
    assert recs[2]["ssbd_drafted"] == 0  # a new segment after the final
    for r in recs:
        proposed, accepted = r["drafts"]["proposed"], r["drafts"]["accepted"]
        assert (r["drafted"], r["accepted"]) == (sum(proposed.values()),
                                                 sum(accepted.values()))
        assert r["ssbd_drafted"] == proposed.get("ssbd", 0)
    ar = run_stream(engine, FewShotFormat(), parse_method("ar"), stream, "en", "de", None,
                    newline, max_tokens=32)
    assert all(r["drafted"] == 0 and r["drafts"]["proposed"] == {} for r in ar)


def test_a_model_label_follows_the_method() -> None:
    m = parse_method("ssbd-b0.2+drafters@trim-de")
    assert m.name == "ssbd-b0.2+drafters@trim-de" and m.model == "trim-de"
    assert m.beta == 0.2 and m.drafters and m.flags == ("drafters",)
    assert parse_method("ar@all").is_ar and parse_method("ar").model == ""
    with pytest.raises(ValueError):
        parse_method("bogus@trim")
