"""``livetrans caption --json``: stdout is one JSON object, so it pipes into a JSON tool;
what a person reads (the room's viewer links, the captions) is on stderr. Run as a user
would, in a subprocess."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.app.test_cli import LIVETRANS
from tests.clients.test_audio import _env
from tests.conftest import SAMPLES


@pytest.mark.parametrize("quiet", [True, False], ids=["quiet", "captions shown"])
def test_json_is_all_of_stdout(live_server, quiet) -> None:
    room = "json-quiet" if quiet else "json-loud"
    proc = subprocess.run(
        [LIVETRANS, "caption", "--file", str(SAMPLES / "asr_sample_en.jsonl"), "--limit", "1",
         "--fast", "--json", "--room", room, "--server", live_server.url,
         *(["--quiet"] if quiet else [])],
        capture_output=True, text=True, timeout=300, env=_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    stats = json.loads(proc.stdout)  # nothing else on stdout
    assert stats["finals"] == 1 and stats["final_to_caption_ms_p50"] > 0
    assert f"room '{room}': viewers watch at" in proc.stderr
    if not quiet:
        assert "[0] " in proc.stderr  # the final caption, for a person
