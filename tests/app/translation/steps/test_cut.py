"""The cut step: a final still looping or framed, cut where that starts."""

from __future__ import annotations

from app.translation.options import TranslateOptions
from app.translation.steps.cut import cut_loop, cut_step
from app.translation.steps.request import UpdateRequest
from app.translation.steps.verdict import Verdict
from tests.app.translation.steps.fakes import FakeBackend, prompt

LOOP = "Am Sonntag, am Montag, am Montag, am Montag, am Montag, am Montag"


def request(is_final: bool = True, clean: bool = False, **opts: object) -> UpdateRequest:
    return UpdateRequest(prompt=prompt("On Sunday", clean_framing=clean),
                         options=TranslateOptions(**opts), is_final=is_final)  # type: ignore[arg-type]


def test_cut_loop_keeps_one_copy_and_the_tokens() -> None:
    b = FakeBackend()
    looped = b.result(LOOP, looped=True)
    cut, was_cut = cut_loop(looped, runaway=True)
    assert was_cut and cut.text == "Am Sonntag, am Montag" and cut.tokens == looped.tokens
    plain = b.result("Am Sonntag")
    assert cut_loop(plain, runaway=False) == (plain, False)


def test_a_repairable_looping_final_is_cut_when_retries_are_on() -> None:
    b = FakeBackend()
    v = Verdict(b.result(LOOP, looped=True), "loop", 20, repairable=True)
    assert cut_step(request(), v).result.text == "Am Sonntag, am Montag"
    assert cut_step(request(), v).cut
    assert cut_step(request(final_retry=False), v) is v
    streamed = Verdict(v.result, "loop", 20, repairable=False)
    assert cut_step(request(), streamed) is streamed


def test_a_framed_final_is_cut_where_the_framing_starts() -> None:
    b = FakeBackend()
    v = Verdict(b.result("Am Sonntag. I hope this translation helps you."), "commentary", 20,
                repairable=False)
    cut = cut_step(request(clean=True), v)
    assert cut.result.text == "Am Sonntag." and cut.cut
    assert cut_step(request(clean=False), v) is v  # cleaning off: only counted
    assert cut_step(request(is_final=False, clean=True), v) is v  # partials: held back later
