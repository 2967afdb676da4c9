"""Method names -> methods: the final-policy flags the faithful-finals comparison uses."""

from __future__ import annotations

import pytest

from app.translator import TranslateOptions
from eval.methods import parse_method


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
    with pytest.raises(ValueError):
        parse_method("ssbd-b0.2+nonsense")
