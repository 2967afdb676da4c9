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


def test_readers_on_shared_data(shared_data) -> None:
    flores = read_flores_pair(shared_data / "flores200", "dev", "en", "de")
    assert len(flores) == 997
    acl = read_acl_pair(shared_data / "acl6060", "dev", "en", "ja")
    assert len(acl) == 468
    streams = read_asr_streams(shared_data / "asr_partials" / "flores200_dev_en.jsonl", 3)
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
