"""The step scheduler, in parts (``app.engine.scheduler`` is its public face).

- ``policy``: ``StepPolicy``, pure: the queue, admission, priorities, fair share,
  preemption, cancellation, the shape of each pass (``plan``) and its outcome (``update``);
  no thread, no lock.
- ``driver``: ``StepScheduler``, the thread that drives the policy and the engine, under a
  supervisor (restarts, the broken state).
- ``errors``: the errors jobs see, and the "already logged" mark.
"""
