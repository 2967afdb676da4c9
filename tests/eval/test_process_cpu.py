"""``eval.process_cpu``: a process's CPU seconds from ``/proc``, the main thread's apart."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from eval.process_cpu import cpu_times

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")


def _spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_a_busy_thread_counts_in_the_total_and_not_in_the_main_threads() -> None:
    before = cpu_times(os.getpid())
    worker = threading.Thread(target=_spin, args=(0.3,))
    worker.start()
    worker.join()  # ended: its time stays in the process's total
    after = cpu_times(os.getpid())
    assert before is not None and after is not None
    assert after.total_s - before.total_s >= 0.25
    assert after.main_s - before.main_s < 0.2


def test_the_main_threads_own_time_is_counted() -> None:
    before = cpu_times(os.getpid())
    _spin(0.3)
    after = cpu_times(os.getpid())
    assert before is not None and after is not None
    assert after.main_s - before.main_s >= 0.25


def test_a_process_that_is_not_there_has_no_times() -> None:
    assert cpu_times(2 ** 22 + 12345) is None  # above the kernel's pid_max
