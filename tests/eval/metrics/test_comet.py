from eval.metrics.comet import comet_score


def test_comet_reports_unavailability_instead_of_a_number(tmp_path) -> None:
    result = comet_score(["a"], ["b"], ["c"], checkpoint=tmp_path / "missing.ckpt")
    assert result.score is None and not result.computed
    assert result.reason.startswith("not computed") and "wmt22-comet-da" in result.signature
