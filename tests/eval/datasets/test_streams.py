import json

import pytest

from eval.datasets.acl6060 import read_acl_pair
from eval.datasets.aligned import DatasetNotFoundError
from eval.datasets.asr_partials import read_asr_streams
from eval.datasets.flores import read_flores_pair
from eval.datasets.streams import lag_k_stream


def test_lag_k_prefixes() -> None:
    ups = lag_k_stream("a b c d e f g", 3)
    assert [u.source for u in ups] == ["a b c", "a b c d e f", "a b c d e f g"]
    assert [u.is_final for u in ups] == [False, False, True]
    assert [u.source for u in lag_k_stream("a b c", 3)] == ["a b c"]


def test_readers_on_the_data_layouts(data_dir) -> None:
    flores = read_flores_pair(data_dir / "flores200", "dev", "en", "de")
    assert len(flores) >= 8 and all(src and ref for src, ref in flores)
    acl = read_acl_pair(data_dir / "acl6060", "dev", "en", "ja")
    talks = (data_dir / "acl6060" / "dev" / "talk_ids.txt").read_text().splitlines()
    assert len(acl) == len(talks) >= 6 and all(src and ref for src, ref in acl)
    streams = read_asr_streams(data_dir / "asr_partials" / "flores200_dev_en.jsonl", 3)
    assert len(streams) == 3 and streams[0].updates[-1].is_final


def test_missing_dataset_says_where(tmp_path) -> None:
    with pytest.raises(DatasetNotFoundError, match="devtest"):
        read_flores_pair(tmp_path, "devtest", "en", "de")


def test_asr_reader_marks_the_last_event_final(tmp_path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps({"id": 1, "events": [{"t": 0.5, "type": "partial",
                                                     "text": "hi"}]}) + "\n")
    (stream,) = read_asr_streams(path)
    assert stream.updates[-1].is_final
