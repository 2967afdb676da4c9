"""The step scheduler: one thread, one forward pass per step, every runnable sequence in it.

Its code lives in ``app.engine.sched``: the pure policy (``sched/policy.py``: admission,
priorities, fair share, preemption, cancellation, failed passes), the thread that drives it
(``sched/driver.py``: the loop, its supervisor, the broken state) and the errors
(``sched/errors.py``). This module is the public face the worker, the server and the
tests import.
"""

from __future__ import annotations

from app.engine.sched.driver import StepScheduler
from app.engine.sched.errors import (
    GenerationFailedError,
    SchedulerBrokenError,
    describe,
    mark_logged,
    was_logged,
)
from app.engine.sched.policy import (
    PRIORITY_FINAL,
    PRIORITY_NAMES,
    PRIORITY_PARTIAL,
    PRIORITY_REQUEST,
    RESTART_BACKOFF_S,
    SchedulerConfig,
    StepPlan,
    StepPolicy,
    Ticket,
    rank_of,
)

__all__ = ["PRIORITY_FINAL", "PRIORITY_NAMES", "PRIORITY_PARTIAL", "PRIORITY_REQUEST",
           "RESTART_BACKOFF_S", "GenerationFailedError",
           "SchedulerBrokenError", "SchedulerConfig", "StepPlan", "StepPolicy",
           "StepScheduler", "Ticket", "describe", "mark_logged", "rank_of", "was_logged"]
