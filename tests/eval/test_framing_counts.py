"""Framing by kind in an eval run's records, as decoded and as shown."""

import json

from eval.framing_counts import count, framing_kinds, table

SOURCE = "Good morning, everyone."


def _record(method: str, text: str, final: bool) -> dict:
    return {"method": method, "text": text, "source": SOURCE, "final": final, "lang": "de"}


def test_every_kind_an_output_shows_is_counted() -> None:
    assert framing_kinds('Translation: "Guten Morgen."', SOURCE) == {"label", "quotes"}
    assert framing_kinds("Guten Morgen.", SOURCE) == set()
    rows = count([
        _record("ar+noclean", 'Translation: "Guten Morgen."', True),
        _record("ar+noclean", "Here is the", False),
        _record("ar", "Guten Morgen.", True),
        _record("ar", "Guten Morgen. The translation is informal", False),
    ])
    assert rows["ar+noclean"]["framed_finals"] == 1
    assert rows["ar+noclean"]["finals_by_kind"] == {"label": 1, "quotes": 1}
    assert rows["ar"]["framed_finals"] == 0
    # a cleaned partial is shown cut where its framing starts
    assert rows["ar"]["framed_partials"] == 1 and rows["ar"]["shown_framed_partials"] == 0


def test_the_table_reads_run_folders(tmp_path) -> None:
    (tmp_path / "records.jsonl").write_text(
        json.dumps(_record("ar", "Guten Morgen.", True)) + "\n")
    assert "| 0/1 | 0 | 0 | 0 | 0 |" in table([tmp_path])


def test_gzipped_records_are_read_too(tmp_path) -> None:
    import gzip

    line = json.dumps(_record("ar+noclean", '"Guten Morgen."', True)) + "\n"
    (tmp_path / "records.jsonl.gz").write_bytes(gzip.compress(line.encode()))
    assert "| 1/1 | 0 | 1 | 0 | 0 |" in table([tmp_path])
