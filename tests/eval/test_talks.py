"""Whole talks in the eval harness: ``--context`` (a talk's streams are one session),
``--glossary`` (term lists per talk), term accuracy scored for every method alike."""

from __future__ import annotations

import json

import pytest

from app.usage import UsageError
from eval.glossaries import load_glossaries
from eval.harness import main

GLOSSARY = {"de": {"*": {"live captions": "Live-Untertitel"},
                   "talk-b": {"laptop": "Klapprechner", "GPU": "Grafikprozessor"}}}


def test_glossary_files_merge_every_talk_with_its_own(tmp_path) -> None:
    path = tmp_path / "g.json"
    path.write_text(json.dumps(GLOSSARY))
    files = load_glossaries(path)
    assert files.for_stream("de", "talk-b") == {"live captions": "Live-Untertitel",
                                                "laptop": "Klapprechner",
                                                "GPU": "Grafikprozessor"}
    assert files.for_stream("de", None) == {"live captions": "Live-Untertitel"}
    assert files.for_stream("ja", "talk-b") is None


@pytest.mark.parametrize("text, says", [
    ("[1]", "expected"), ("{", "not a JSON"), ('{"de": []}', "must map"),
    ('{"de": {"*": {"a": 1}}}', "de / \\*: glossary entry 1")])
def test_bad_glossary_files_are_one_line(tmp_path, text, says) -> None:
    path = tmp_path / "g.json"
    path.write_text(text)
    with pytest.raises(UsageError, match=says):
        load_glossaries(path)


def test_talks_with_context_and_a_glossary(data_dir, tmp_path) -> None:
    glossary = tmp_path / "g.json"
    glossary.write_text(json.dumps(GLOSSARY))
    out = tmp_path / "talks"
    assert main(["--dataset", "acl", "--acl-dir", str(data_dir / "acl6060"), "--langs", "de",
                 "--talk-limit", "2", "--lag", "6", "--betas", "0.2",
                 "--methods", "ar,ssbd-b0.2+nogloss,ssbd-b0.2+ctx0",
                 "--context", "2", "--glossary", str(glossary), "--mask-k", "3",
                 "--display-modes", "", "--out", str(out)]) == 0
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert {r["talk"] for r in records} == {"talk-a", "talk-b"}
    assert {r["stream"] for r in records} == {"0", "1", "3", "4"}  # two of each talk
    finals = {(r["method"], r["stream"]): r for r in records if r["final"]}
    # the second sentence of a talk sees the first (its prompt is longer with context)
    assert finals[("ssbd-b0.2", "1")]["prompt_tokens"] > \
        finals[("ssbd-b0.2+ctx0", "1")]["prompt_tokens"]
    # terms that apply are recorded for every method, used only by those with the glossary
    assert finals[("ar", "4")]["terms"] == [["laptop", "Klapprechner"],
                                           ["GPU", "Grafikprozessor"]]
    assert finals[("ssbd-b0.2+nogloss", "4")]["glossary"] is None
    assert finals[("ssbd-b0.2", "4")]["glossary"]["applied"] == 2
    summary = json.loads((out / "summary.json").read_text())
    rows = {row["method"]: row for row in summary.values()}
    assert rows["ssbd-b0.2"]["context"] == 2 and rows["ssbd-b0.2+ctx0"]["context"] == 0
    assert rows["ssbd-b0.2"]["term_accuracy"] is not None
    assert rows["ssbd-b0.2"]["term_accuracy"] >= rows["ssbd-b0.2+nogloss"]["term_accuracy"]
    assert "Whole talks" in (out / "tables.md").read_text()
