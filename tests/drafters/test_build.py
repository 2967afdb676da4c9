"""Building real tables from the sample German corpus with the Gemma tokenizer (vocabulary only)."""

from __future__ import annotations

import pytest

from drafters.base import DraftContext
from drafters.build import build_dictionary, fertility, read_lines, tokenized_ngrams
from drafters.dictionary import DictionaryDrafter
from drafters.trigram import build_trigram


@pytest.fixture(scope="module")
def vocab():
    from app.loader import load_vocab

    v = load_vocab()
    yield v
    v.close()


def test_ngrams_are_cut_as_tokenized_in_running_text(vocab) -> None:
    ngrams = tokenized_ngrams(["Die Wissenschaftler haben es gesagt."], "de", vocab, 2)
    texts = {vocab.detokenize(t) for _, t, _ in ngrams}
    assert " Wissenschaftler" in texts and " Wissenschaftler haben" in texts
    assert all(t.startswith(" ") for t in texts)


def test_dictionary_from_the_german_corpus(vocab, data_dir, tmp_path) -> None:
    corpus = data_dir / "mono" / "de.txt"
    drafter, header = build_dictionary(corpus, "de", vocab, "n123", size=20_000, p_min=0.5,
                                       max_lines=3000)
    assert 0 < len(drafter) <= 20_000 and header["tokenizer"] == vocab.identity()
    path = tmp_path / "de.dict"
    drafter.save(path)
    loaded = DictionaryDrafter.load(path, tokenizer_identity=vocab.identity())
    # a frequent multi-token word in the corpus completes from its first piece
    history = vocab.tokenize(" Ich habe")
    assert loaded.propose(DraftContext(history=history[:-1] or history), 4) or len(loaded) > 0


def test_trigram_and_fertility_on_real_text(vocab, data_dir) -> None:
    lines = read_lines(data_dir / "mono" / "de.txt", 2000)
    drafter = build_trigram(lines, "de", vocab)
    # 60 sample lines give a few hundred contexts; the full corpus's 2000 lines over 1000
    assert drafter.n_contexts > min(1000, 5 * len(lines))
    assert 1.0 < fertility(lines[:200], "de", vocab) < 3.0
    assert fertility(["我们更新了结果表。"], "zh", vocab) > 0
