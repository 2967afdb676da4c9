"""How llama.cpp's OpenMP worker threads wait between operations (on how many cores they
run while other parts of the process compute: ``app.cores``).

The CPU build of llama.cpp runs every graph operation on an OpenMP thread team. Between
operations idle threads either spin (``active``), sleep on a futex (``passive``), or spin
briefly and then sleep (the OpenMP runtime's default). Measured with ``livetrans bench engine`` on
the 2-core development machine (Gemma 3 270M, 2 threads, median ms):

==================  ==================  ===================  ==========================
policy              single-token step   verify 8 (8 rows)    same, one busy process
==================  ==================  ===================  ==========================
OpenMP default      17-19               72-77                32 (step), 164-302 (8)
active              20                  78                   -
passive             46-61               106-152              34 (step), 139-149 (8)
==================  ==================  ===================  ==========================

A dedicated server is 2.5x faster per decode step without ``passive``; a CPU shared with
other busy processes is steadier with it. The variable is read once, when the OpenMP
runtime loads with ``llama_cpp``, so it must be set before that import.
"""

from __future__ import annotations

import logging
import os
import sys

log = logging.getLogger("livetrans.threads")

POLICIES = ("auto", "active", "passive")


def configure_omp_wait(policy: str) -> None:
    """Set ``OMP_WAIT_POLICY`` for ``policy`` unless the user set it already.

    ``auto`` keeps the OpenMP runtime's own default (spin briefly, then sleep).
    """
    if policy not in POLICIES:
        raise ValueError(f"omp wait policy must be one of {', '.join(POLICIES)}")
    if "llama_cpp" in sys.modules:
        log.warning("llama_cpp is already loaded: OMP wait policy %r has no effect", policy)
        return
    if policy != "auto" and "OMP_WAIT_POLICY" not in os.environ:
        os.environ["OMP_WAIT_POLICY"] = policy.upper()

