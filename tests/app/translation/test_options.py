"""The options grouped by concern: the groups and the flat record agree both ways."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields, replace

import pytest

from app.translation.options import (
    DEFAULT_OPTIONS,
    Display,
    Drafting,
    Finals,
    Framing,
    Languages,
    Limits,
    Talk,
    TranslateOptions,
)

GROUPS = (Languages, Limits, Drafting, Display, Finals, Talk, Framing)


def test_every_flat_option_is_in_exactly_one_group() -> None:
    flat = [f.name for f in fields(TranslateOptions)]
    grouped = [f.name for group in GROUPS for f in fields(group)]
    assert sorted(flat) == sorted(grouped)
    assert len(grouped) == len(set(grouped))


def test_the_flat_defaults_are_the_groups_defaults() -> None:
    assert TranslateOptions.of() == TranslateOptions() == DEFAULT_OPTIONS
    for group in GROUPS:
        assert getattr(DEFAULT_OPTIONS, _prop(group)) == group()


def test_groups_are_frozen() -> None:
    with pytest.raises(FrozenInstanceError):
        DEFAULT_OPTIONS.drafting.beta = 0.5  # type: ignore[misc]


def test_built_from_groups_reads_back_per_group_and_flat() -> None:
    opts = TranslateOptions.of(Languages("ja", "en"), drafting=Drafting(beta=0.4, drafters=[]),
                               display=Display(mask_k=1), talk=Talk(context=0))
    assert (opts.source_lang, opts.target_lang, opts.beta, opts.mask_k, opts.context) == (
        "ja", "en", 0.4, 1, 0)
    assert opts.languages == Languages("ja", "en")
    assert opts.drafting == Drafting(beta=0.4, drafters=[])
    assert opts.limits == Limits() and opts.finals == Finals() and opts.framing == Framing()


def test_flat_construction_and_replace_still_work() -> None:
    opts = replace(TranslateOptions(target_lang="fr", mask_k=5), final_retry=False)
    assert opts.display == Display(mask_k=5)
    assert opts.finals == Finals(final_retry=False)
    assert opts.languages.target_lang == "fr"


def test_uses_and_beta_for() -> None:
    assert Drafting().uses("ngram") and not Drafting(drafters=["previous"]).uses("ngram")
    assert TranslateOptions(drafters=[]).uses("previous") is False
    assert Drafting(beta=0.3, final_beta=0.0).beta_for(True) == 0.0
    assert Drafting(beta=0.3, final_beta=None).beta_for(True) == 0.3
    assert Drafting(beta=0.3, final_beta=0.0).beta_for(False) == 0.3


def _prop(group: type) -> str:
    return {Languages: "languages", Limits: "limits", Drafting: "drafting",
            Display: "display", Finals: "finals", Talk: "talk", Framing: "framing"}[group]
