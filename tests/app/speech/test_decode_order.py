"""The recogniser's decode order (``app.speech.decode_order``), with plain turns."""

from __future__ import annotations

from dataclasses import dataclass

from app.speech.decode_order import choose
from app.speech.whisper_stream import Decode


@dataclass
class Turn:
    enqueued_at: float
    decode: Decode | None


def test_a_decode_a_final_waits_for_goes_before_older_partials() -> None:
    old_partial = Turn(0.0, Decode("partial", 100))
    for kind in ("final", "long", "pause"):
        urgent = Turn(5.0, Decode(kind, 100))
        choice = choose([old_partial, urgent], now=5.0, behind_s=60)
        assert choice is not None and choice.turn is urgent and choice.decode


def test_partials_are_served_oldest_first() -> None:
    a, b = Turn(2.0, Decode("partial", 1)), Turn(1.0, Decode("partial", 1))
    choice = choose([a, b], now=2.5, behind_s=60)
    assert choice is not None and choice.turn is b and choice.decode


def test_behind_partials_are_thinned_and_finals_never() -> None:
    partial, final = Turn(0.0, Decode("partial", 1)), Turn(0.0, Decode("final", 1))
    choice = choose([partial], now=10.0, behind_s=2.0)
    assert choice is not None and choice.turn is partial and not choice.decode
    choice = choose([partial, final], now=10.0, behind_s=2.0)
    assert choice is not None and choice.turn is final and choice.decode


def test_nothing_planned_is_nothing_to_do() -> None:
    assert choose([Turn(0.0, None)], now=1.0) is None
    assert choose([], now=1.0) is None
