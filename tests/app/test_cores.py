"""Cores lent by the parts of the process that compute on them (``app.cores``)."""

from __future__ import annotations

import pytest

from app.cores import CoreLoans


def test_loans_add_up_and_come_back_even_after_a_failure():
    loans = CoreLoans()
    with loans.lent(1):
        with loans.lent(2):
            assert loans.now == 3
            assert loans.threads_for(8) == 5
        assert loans.now == 1
    with pytest.raises(ValueError), loans.lent(1):
        raise ValueError("a decode failed")
    assert loans.now == 0
    assert loans.run(1, lambda: loans.now) == 1


def test_the_engine_keeps_at_least_one_thread():
    loans = CoreLoans()
    with loans.lent(4):
        assert loans.threads_for(2) == 1
    assert loans.threads_for(2) == 2
