"""CPU seconds a process has spent, all its threads and its main thread alone (Linux ``/proc``).

On a 2-core machine a server competes with itself: its event loop's Python and llama.cpp's
compute threads share the cores. Read before and after a benchmark run, these say whether
the main thread (uvicorn's event loop in ``livetrans serve``) took the time the model
needed, or the cores were the model's. ``None`` where ``/proc`` is not there (macOS) or the
process has gone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class CpuTimes:
    total_s: float  # every thread's, the ended ones too
    main_s: float  # the main thread's


def _stat_seconds(path: Path) -> float:
    """utime + stime of one ``stat`` file. The command name, in parentheses, may itself
    hold spaces and parentheses, so the fields are read after its last ')'."""
    text = path.read_text()
    fields = text[text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def cpu_times(pid: int) -> CpuTimes | None:
    base = Path("/proc") / str(pid)
    try:
        return CpuTimes(_stat_seconds(base / "stat"),
                        _stat_seconds(base / "task" / str(pid) / "stat"))
    except (OSError, ValueError, IndexError):
        return None
