from eval.metrics.quality import bleu_score, bleu_tokenizer, chrf_score


def test_chrf_and_bleu() -> None:
    assert chrf_score(["Das ist gut."], ["Das ist gut."]) == 100.0
    assert round(bleu_score(["a b c d e"], ["a b c d e"], "de"), 6) == 100.0
    assert bleu_tokenizer("zh") == "zh"
