"""The OpenMP wait-policy knob: set before llama_cpp loads, never over the user's choice."""

from __future__ import annotations

import os
import sys

import pytest

from app.engine.cpu_threads import configure_omp_wait


@pytest.fixture()
def fresh(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delitem(sys.modules, "llama_cpp", raising=False)
    return monkeypatch


def test_passive_sets_the_variable(fresh):
    configure_omp_wait("passive")
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"


def test_auto_leaves_the_openmp_default(fresh):
    configure_omp_wait("auto")
    assert "OMP_WAIT_POLICY" not in os.environ


def test_a_users_own_setting_wins(fresh):
    fresh.setenv("OMP_WAIT_POLICY", "ACTIVE")
    configure_omp_wait("passive")
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"


def test_too_late_once_llama_cpp_is_loaded(fresh):
    fresh.setitem(sys.modules, "llama_cpp", object())
    configure_omp_wait("passive")
    assert "OMP_WAIT_POLICY" not in os.environ


def test_unknown_policy_is_an_error(fresh):
    with pytest.raises(ValueError):
        configure_omp_wait("spin")

