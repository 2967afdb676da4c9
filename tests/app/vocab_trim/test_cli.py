"""``livetrans trim-vocab`` on the real model: the file llama.cpp loads, what it keeps,
what it still spells, and the one-line refusals."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from app.vocab_trim.gguf_rewrite import LANGS_KEY, SOURCE_IDS_KEY, open_gguf, token_table
from tests.app.vocab_trim.served_langs import assert_serves_only_its_languages

LIVETRANS = shutil.which("livetrans", path=str(Path(sys.executable).parent)) or "livetrans"
SAMPLE_DE = Path(__file__).resolve().parents[3] / "eval" / "samples" / "mono" / "de.txt"


def test_the_report_counts_what_was_kept_and_checks_the_new_tokenizer(trimmed_en_de) -> None:
    path, report = trimmed_en_de
    tokens = report["tokens"]
    assert tokens["before"] == 262144 and tokens["after"] < tokens["before"] // 3
    assert tokens["after"] == sum(v for k, v in tokens.items() if k.startswith("kept_"))
    assert report["file_mb"]["after"] < report["file_mb"]["before"] / 2
    check = report["check"]
    assert check["lines"] == 68 and check["round_trip"] == check["lines"]
    assert check["same_pieces"] == check["all_pieces_kept"] == check["lines"]
    assert 0.8 < report["held_out"][next(iter(report["held_out"]))]["token_coverage"] <= 1.0


def test_the_trimmed_file_keeps_the_tokenizer_arrays_and_rows_in_step(trimmed_en_de) -> None:
    from app.model_files import default_model_path

    path, _ = trimmed_en_de
    full, cut = open_gguf(default_model_path()), open_gguf(path)
    old, new = token_table(full), token_table(cut)
    source_ids = np.asarray(cut.fields[SOURCE_IDS_KEY].contents())
    assert cut.fields[LANGS_KEY].contents() == "en,de" and len(source_ids) == len(new)
    assert [old.tokens[i] for i in source_ids] == new.tokens
    assert np.array_equal(old.scores[source_ids], new.scores)
    assert np.array_equal(old.types[source_ids], new.types)
    rows = {t.name: t for t in full.tensors}["token_embd.weight"].data
    cut_rows = {t.name: t for t in cut.tensors}["token_embd.weight"].data
    assert np.array_equal(rows[source_ids], cut_rows)  # byte for byte, not re-quantised
    for key in ("bos", "eos", "unknown", "padding"):
        name = f"tokenizer.ggml.{key}_token_id"
        assert new.tokens[cut.fields[name].contents()] == old.tokens[full.fields[name].contents()]


def test_kept_tokens_get_the_same_logits_as_in_the_full_model(trimmed_en_de) -> None:
    """Measured: identical to the bit (the output layer's kept rows are the same bytes, and
    each row's dot product does not depend on the other rows)."""
    from app.engine.engine import Engine
    from app.loader import load_model
    from app.settings import ModelSettings
    from app.translation.prompts import FewShotFormat, tokenize_prompt

    path, _ = trimmed_en_de
    source_ids = np.asarray(open_gguf(path).fields[SOURCE_IDS_KEY].contents())
    prompt = FewShotFormat().translation("We have updated the results table.", "en", "de")
    seen = {}
    for model in (None, str(path)):
        rt = load_model(ModelSettings(model=model, n_ctx=512, parallel=1)).runtime
        try:
            ids = tokenize_prompt(prompt, lambda t, b, s, rt=rt: rt.tok.tokenize(
                t, add_bos=b, special=s))
            first, _ = Engine(rt).evaluate_prompt(ids)
            seen[model] = (ids, Engine(rt).row(first).copy())
        finally:
            rt.close()
    (full_ids, full_row), (cut_ids, cut_row) = seen[None], seen[str(path)]
    assert [int(source_ids[t]) for t in cut_ids] == full_ids
    assert np.array_equal(full_row[source_ids], cut_row)


@pytest.mark.parametrize("text", [
    "Emoji 😀🎉 and a flag 🇩🇪.",
    "日本語のテキストと中文文本。",
    "שלום עולם",  # Hebrew, right to left
    "مرحبا بالعالم",  # Arabic, right to left
    "Привіт, світе! Ελληνικά. हिन्दी",
])
def test_text_outside_the_kept_languages_still_tokenizes(trimmed_en_de, text) -> None:
    from app.engine.vocab import LlamaVocab

    path, _ = trimmed_en_de
    vocab = LlamaVocab.load(path)
    try:
        ids = vocab.tokenize(text)
        assert ids and max(ids) < vocab.n_vocab
        assert vocab.detokenize(ids) == text
        pieces = [vocab.token_bytes(i) for i in ids]
        assert all(p for p in pieces)  # no empty or unknown piece
    finally:
        vocab.close()


def test_drafter_tables_build_against_the_trimmed_model_and_refuse_the_other(
        trimmed_en_de, vocab, tmp_path) -> None:
    from app.engine.vocab import LlamaVocab
    from drafters.build import read_lines
    from drafters.trigram import TableMismatchError, TrigramDrafter, build_trigram

    path, _ = trimmed_en_de
    cut = LlamaVocab.load(path)
    try:
        lines = read_lines(SAMPLE_DE)
        table = build_trigram(lines, "de", cut)
        table.save(tmp_path / "de.trigram.npz")
        loaded = TrigramDrafter.load(tmp_path / "de.trigram.npz", cut.identity(), cut.n_vocab)
        assert loaded.n_contexts == table.n_contexts and loaded.vocab_size == cut.n_vocab
        with pytest.raises(TableMismatchError):
            TrigramDrafter.load(tmp_path / "de.trigram.npz", vocab.identity(), vocab.n_vocab)
        full_table = build_trigram(lines, "de", vocab)
        full_table.save(tmp_path / "full.trigram.npz")
        with pytest.raises(TableMismatchError):
            TrigramDrafter.load(tmp_path / "full.trigram.npz", cut.identity(), cut.n_vocab)
    finally:
        cut.close()


def test_the_trimmed_model_serves_its_languages_and_refuses_the_others(trimmed_en_de) -> None:
    import asyncio
    import json

    import websockets
    from openai import OpenAI

    from tests.conftest import LiveServer

    path, _ = trimmed_en_de
    with LiveServer(model=str(path)) as server:
        client = OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
        assert_serves_only_its_languages(client, "trimmed to de, en")

        async def live_start() -> dict:
            url = server.url.replace("http://", "ws://") + "/v1/live"
            async with websockets.connect(url) as ws:
                await ws.send(json.dumps({"type": "start", "target_langs": ["de", "ja"]}))
                return json.loads(await asyncio.wait_for(ws.recv(), 60))

        frame = asyncio.run(live_start())
    assert frame["type"] == "error" and frame["code"] == "language_not_served"
    assert frame["param"] == "target_langs" and "'ja'" in frame["message"]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([LIVETRANS, "trim-vocab", *args], capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)


def _write_gguf(path: Path, tokenizer_model: str, merges: bool) -> None:
    import gguf

    writer = gguf.GGUFWriter(path, "llama")
    writer.add_string("tokenizer.ggml.model", tokenizer_model)
    writer.add_array("tokenizer.ggml.tokens", ["a", "b", "ab"])
    writer.add_array("tokenizer.ggml.scores", [0.0, 0.0, -1.0])
    writer.add_array("tokenizer.ggml.token_type", [1, 1, 1])
    if merges:
        writer.add_array("tokenizer.ggml.merges", ["a b"])
    writer.add_tensor("token_embd.weight", np.zeros((3, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.mark.parametrize("case, expected", [
    ("unknown language", "Unsupported language 'xx'"),
    ("no gguf", "is not a GGUF model file"),
    ("bpe tokenizer", "only SentencePiece vocabularies"),
    ("out is the model", "is the model being trimmed"),
    ("out is a folder", "is a folder"),
    ("corpus of another language", "ja is not in --langs"),
    ("missing corpus", "no such file"),
    ("top below zero", "'-1' is not a whole number >= 0"),
])
def test_mistakes_are_one_line_exit_2_and_leave_no_file(tmp_path, case, expected) -> None:
    out = tmp_path / "out" / "trimmed.gguf"
    args = {"langs": "en,de", "out": str(out), "extra": []}
    if case == "unknown language":
        args["langs"] = "en,xx"
    elif case == "no gguf":
        args["extra"] = ["--model", str(SAMPLE_DE)]
    elif case == "bpe tokenizer":
        model = tmp_path / "bpe.gguf"
        _write_gguf(model, "gpt2", merges=True)
        args["extra"] = ["--model", str(model)]
    elif case == "out is the model":
        model = tmp_path / "spm.gguf"
        _write_gguf(model, "llama", merges=False)
        args["out"] = str(model)
        args["extra"] = ["--model", str(model)]
    elif case == "out is a folder":
        args["out"] = str(tmp_path)
    elif case == "corpus of another language":
        args["extra"] = ["--corpus", f"ja={SAMPLE_DE}"]
    elif case == "missing corpus":
        args["extra"] = ["--corpus", f"de={tmp_path / 'nothing.txt'}"]
    elif case == "top below zero":
        args["extra"] = ["--top", "-1"]
    proc = _cli("--langs", args["langs"], "--out", args["out"], *args["extra"])
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], proc.stderr
    assert not out.exists()
    assert not list(tmp_path.rglob("*.part"))


def test_a_trimmed_model_trimmed_again_still_points_at_the_original(trimmed_en_de,
                                                                    vocab, tmp_path) -> None:
    from app.model_files import default_model_path
    from app.vocab_trim.cli import main
    from app.vocab_trim.gguf_rewrite import SOURCE_TOKENIZER_KEY
    from eval.harness import trimmed_ids

    path, _ = trimmed_en_de
    again = tmp_path / "again.gguf"
    assert main(["--model", str(path), "--langs", "en,de", "--top", "0", "--out", str(again),
                 "--corpus", f"de={SAMPLE_DE}"]) == 0
    full, cut = token_table(open_gguf(default_model_path())), open_gguf(again)
    source_ids = [int(i) for i in cut.fields[SOURCE_IDS_KEY].contents()]
    assert len(source_ids) < len(token_table(open_gguf(path)))
    assert [full.tokens[i] for i in source_ids] == token_table(cut).tokens
    assert cut.fields[SOURCE_TOKENIZER_KEY].contents() == vocab.identity()
    # the eval harness maps ids only into the vocabulary the file was cut from
    assert trimmed_ids(str(again), vocab.identity()) == source_ids
    assert trimmed_ids(str(again), "262144:another") is None
