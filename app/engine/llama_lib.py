"""The one place that imports llama-cpp-python and routes llama.cpp's log lines.

Both the runtime (model + context) and the vocabulary-only loader need the library and the
log routing; keeping them here lets neither import the other.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger("livetrans.llama")


def import_llama():  # noqa: ANN201 - returns the module
    # OpenMP reads its wait policy when this import loads it: see app.engine.cpu_threads.
    import llama_cpp

    return llama_cpp


# ggml_log_level: 1 debug, 2 info, 3 warn, 4 error, 5 continuation of the previous line.
_LOG_LEVELS = {1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}


_LOG_CALLBACK = None


def silence_llama_logs(ll, verbose: bool = False) -> None:  # noqa: ANN001 - the module
    """Route llama.cpp's log lines to Python logging (errors only unless ``verbose``)."""
    global _LOG_CALLBACK

    def _callback(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        py_level = _LOG_LEVELS.get(int(level), logging.DEBUG)
        if verbose or py_level >= logging.ERROR:
            log.log(py_level, text.decode("utf-8", "replace").rstrip())

    # Keep a reference: ctypes callbacks must outlive their registration.
    _LOG_CALLBACK = ll.llama_log_callback(_callback)
    ll.llama_log_set(_LOG_CALLBACK, ctypes.c_void_p(0))
