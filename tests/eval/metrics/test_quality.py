import sacrebleu

from eval.metrics.quality import Bleu, ChrF, bleu_tokenizer


def test_chrf_and_bleu() -> None:
    assert ChrF().corpus_score(["Das ist gut."], ["Das ist gut."]).score == 100.0
    assert round(Bleu("de").corpus_score(["a b c d e"], ["a b c d e"]).score, 6) == 100.0
    assert bleu_tokenizer("zh") == "zh"


def test_signatures_are_sacrebleus_without_scoring_first() -> None:
    v = sacrebleu.__version__
    assert ChrF().signature == f"chrF|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:{v}"
    assert "nw:2" in ChrF(word_order=2).signature  # chrF++
    assert Bleu("zh").signature == \
        f"BLEU|nrefs:1|case:mixed|eff:no|tok:zh|smooth:exp|version:{v}"
    # the same text sacrebleu gives once it has scored a corpus
    scored = sacrebleu.metrics.CHRF()
    scored.corpus_score(["a"], [["a"]])
    assert ChrF().signature == f"chrF|{scored.get_signature()}"
