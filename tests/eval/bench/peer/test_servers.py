"""The bench's processes (``eval.bench.peer.servers``): what runs no server is tested here."""

from __future__ import annotations

import pytest

from app.usage import UsageError
from eval.bench.peer.servers import describe_machine, machine, resolve_trimmed


def test_the_machine_is_named_with_its_cpu_and_cores() -> None:
    m = machine()
    assert m["cpu"] and m["cores"] >= 1
    line = describe_machine(m)
    assert line.startswith("machine: ") and f"{m['cores']} cores" in line


def test_a_trimmed_file_that_is_not_there_is_one_line(tmp_path) -> None:
    assert resolve_trimmed(None, tmp_path / "m.gguf", "de") is None
    with pytest.raises(UsageError, match="no such file"):
        resolve_trimmed(str(tmp_path / "missing.gguf"), tmp_path / "m.gguf", "de")
