"""What ``livetrans serve`` says while it starts, so an organiser knows when to begin.

The port opens before the model is loaded (``/health`` answers ``loading`` meanwhile), so
uvicorn's "running on" line is no sign that captions can be served. Two things here:

- ``progress``: a long step (building or finding the trimmed copy, loading the model) is
  logged when it begins and every few seconds while it lasts, never a silent minute;
- ``ReadyLine``: exactly one ``ready: serving http://HOST:PORT (...)`` line, once the server
  listens *and* the model is loaded, whichever comes last. That is the line to wait for.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

log = logging.getLogger("livetrans.startup")

PROGRESS_EVERY_S = 5.0


@contextmanager
def progress(what: str, every_s: float = PROGRESS_EVERY_S,
             logger: logging.Logger = log) -> Iterator[None]:
    """``what`` logged now, then ``still <what> (12s)`` every ``every_s`` until the block
    ends (a log line reaches a terminal, a container's log and a JSON log alike)."""
    t0 = time.perf_counter()
    done = threading.Event()
    logger.info("%s", what)

    def beat() -> None:
        while not done.wait(every_s):
            logger.info("still %s (%.0fs)", what, time.perf_counter() - t0)

    beater = threading.Thread(target=beat, name="startup-progress", daemon=True)
    beater.start()
    try:
        yield
    finally:
        done.set()
        beater.join()


def describe_served(langs: Iterable[str] | None, model: str, prompt_format: str,
                    supported: Iterable[str] = ()) -> str:
    """``languages en,de, model gemma-3-270m, prompt format few-shot``: what the ready
    line says is served (``langs`` None: any supported language; a list keeps the order
    the organiser gave, a set is sorted)."""
    if langs is None:
        shown = f"any supported ({','.join(sorted(supported))})" if supported else "any"
    else:
        shown = ",".join(langs if isinstance(langs, (list, tuple)) else sorted(langs))
    return f"languages {shown}, model {model}, prompt format {prompt_format}"


def listen_url(host: str, port: int, scheme: str = "http") -> str:
    """``http://127.0.0.1:8000`` (an IPv6 address in brackets)."""
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


class ReadyLine:
    """Says ``ready: serving URL (what)`` once both halves are known: the URL the server
    listens on (``listening``) and what the loaded model serves (``loaded``). Either may come
    first: a fast load can beat the port opening."""

    def __init__(self, logger: logging.Logger = log) -> None:
        self._log = logger
        self._lock = threading.Lock()
        self._url: str | None = None
        self._served: str | None = None
        self._said = False

    @property
    def said(self) -> bool:
        return self._said

    def listening(self, url: str) -> None:
        """The server accepts connections at ``url``."""
        with self._lock:
            self._url = url
            if self._served is None:
                self._log.info("listening on %s; not serving yet: the model is loading "
                               "(/health answers 503 'loading' until the ready: line)", url)
        self._say()

    def loaded(self, served: str) -> None:
        """The model is loaded; ``served`` is what it serves (``describe_served``)."""
        with self._lock:
            self._served = served
        self._say()

    def _say(self) -> None:
        with self._lock:
            if self._said or self._url is None or self._served is None:
                return
            self._said = True
        self._log.info("ready: serving %s (%s)", self._url, self._served)
