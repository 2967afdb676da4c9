"""llama.cpp engine: prefix-cached evaluation, batched draft verification, KV truncation.

Threads and who owns what (the one place this is written down; each lock's definition
points here):

- **The llama.cpp context** (``LlamaRuntime``: ``llama_decode``, KV cache, logits, the KV
  slot table) has ONE owner, the step scheduler's thread (``StepScheduler._run``,
  app/engine/sched/driver.py). Every forward pass and cache edit happens there. The
  scheduler's policy (``StepPolicy``,
  app/engine/sched/policy.py) is called under ``StepScheduler._cond`` only, and the calls
  that touch the context (``plan``, ``update``, ``reset``) on that thread only. Tools
  without a server (eval, benches, tests) drive an ``Engine`` from one thread of their own.
  The context has no lock: one owner needs none.
- **The tokenizer** (``LlamaVocab``) is called from every thread: the event loop (display
  masks; the jobs' prompts, drafts and retries) and the scheduler thread (each new token's
  bytes). Its methods are thread-safe: no shared buffers, and its own leaf lock around the
  C calls.
- **Jobs** (``EngineWorker``) are tasks on the event loop: they build prompts and await
  their generations (a future the scheduler completes); they never touch the context.

Lock order (acquire left before right, never the reverse; a thread holding a lock takes
only locks to its right):

    StepScheduler._cond  ->  EngineWorker._lock  ->  LlamaVocab._c_lock

``_cond`` calls the admission callback, which marks the job started under
``EngineWorker._lock``. ``LlamaVocab._c_lock`` and ``SessionStore._lock``
(app/translation/sessions.py)
are leaves: nothing is acquired while either is held. Asyncio locks (a live connection's
``send_lock``) are on the event loop only and never held across a thread lock wait.
"""
