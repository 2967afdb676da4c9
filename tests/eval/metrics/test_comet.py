from eval.metrics.comet import Comet


def test_comet_reports_unavailability_instead_of_a_number(tmp_path) -> None:
    result = Comet(tmp_path / "missing.ckpt").corpus_score(["a"], ["b"], ["c"])
    assert result.score is None and str(result) == "COMET = -"
    assert result.note.startswith("not computed")
    assert str(result.signature) == "COMET|model:Unbabel/wmt22-comet-da|ref:yes"
