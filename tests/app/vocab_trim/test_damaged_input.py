"""``livetrans trim-vocab`` on damaged input: a damaged GGUF of any kind and an ``--out`` or
``--report`` that cannot be written are one line on stderr, exit code 2, with nothing
written, and refused before the work (a damaged header before any allocation it claims)."""

from __future__ import annotations

import os
import re
import resource
import shutil
import socket
import stat
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from app.usage import UsageError
from app.vocab_trim import gguf_check
from app.vocab_trim.gguf_check import UnreadableGGUFError, check_gguf_file
from app.vocab_trim.gguf_rewrite import (
    TrimError,
    open_gguf,
    special_token_ids,
    token_table,
    write_trimmed,
)
from app.vocab_trim.output import atomic_output, check_output_path, not_a_regular_file
from tests.app.vocab_trim.ggufs import (
    ARR,
    F32,
    GGML_Q4_0,
    I32,
    STR,
    TOKENS,
    U8,
    U32,
    U64,
    gguf_file,
    kv,
    kv_array,
    kv_str,
    kv_u32,
    model_kvs,
    model_tensors,
    string,
    tensor_info,
    tiny_model,
)

LIVETRANS = shutil.which("livetrans", path=str(Path(sys.executable).parent)) or "livetrans"
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
# root ignores permission bits through these capabilities: dropped (util-linux's setpriv,
# in every Debian), it meets a read-only file or folder as any user does
AS_A_USER = (["setpriv", "--bounding-set=-dac_override,-dac_read_search",
              "--inh-caps=-dac_override,-dac_read_search", "--"] if IS_ROOT else [])


def _with_kvs(*extra: bytes, n_kv: int | None = None, **kwargs) -> bytes:  # noqa: ANN003
    infos, data = model_tensors()
    return gguf_file(model_kvs() + list(extra), infos, data, n_kv=n_kv, **kwargs)


def _with_tensor(info: bytes) -> bytes:
    infos, data = model_tensors()
    return gguf_file(model_kvs(), infos + [info], data)


# every kind of damage a header can carry: the file's bytes, and words the refusal names
DAMAGED = {
    "bad magic": (tiny_model(magic=b"GGML"), "not GGUF"),
    "version 1": (tiny_model(version=1), "version 1;"),
    "version 4": (tiny_model(version=4), "version 4;"),
    "empty file": (b"", "the file is empty"),
    "half a header": (tiny_model()[:13], "shorter than a GGUF header"),
    "huge key count": (tiny_model(n_kv=2**62), "the key count claims"),
    "huge tensor count": (tiny_model(n_tensors=2**40), "the tensor count claims"),
    "huge key name": (_with_kvs(string("x", length=2**40) + struct.pack("<I", U8) + b"\0"),
                      "needs 1,099,511,627,776 bytes"),
    "huge string value": (_with_kvs(kv("general.name", STR, string("x", length=2**63))),
                          "key 'general.name'"),
    "huge byte array": (_with_kvs(kv_array("general.blob", U8, [1, 2], length=10**9)),
                        "claims 1,000,000,000 entries"),
    "huge string array": (_with_kvs(kv_array("general.tags", STR, ["a"], length=2**61)),
                          "key 'general.tags' claims"),
    "huge token array": (gguf_file(model_kvs()[:2] + [kv_array(
        "tokenizer.ggml.tokens", STR, TOKENS, length=10**9)] + model_kvs()[3:],
        *model_tensors()), "key 'tokenizer.ggml.tokens' claims"),
    "unknown value type": (_with_kvs(kv("general.odd", 13, b"\0" * 8)), "value type 13"),
    "unknown item type": (_with_kvs(kv("general.odd", ARR, struct.pack("<IQ", 99, 1))),
                          "items of type 99"),
    "array of arrays": (_with_kvs(kv("general.nest", ARR, struct.pack("<IQ", ARR, 1)
                                     + struct.pack("<IQ", U8, 0))), "array of arrays"),
    "duplicate key": (_with_kvs(kv_str("tokenizer.ggml.model", "llama")), "appears twice"),
    "key not UTF-8": (_with_kvs(kv(b"general.\xff", U8, b"\0")), "not UTF-8"),
    "token not UTF-8": (gguf_file(model_kvs()[:2] + [kv(
        "tokenizer.ggml.tokens", ARR, struct.pack("<IQ", STR, len(TOKENS))
        + b"".join(string(t) for t in [*TOKENS[:-1], b"\xc3("]))] + model_kvs()[3:],
        *model_tensors()), f"item {len(TOKENS) - 1} of key 'tokenizer.ggml.tokens'"),
    "bad alignment": (_with_kvs(kv_u32("general.alignment", 48)), "not a power of two"),
    "alignment of another type": (_with_kvs(kv("general.alignment", U64,
                                               struct.pack("<Q", 32))), "not uint32"),
    "huge dimension count": (_with_tensor(tensor_info("x", [4], n_dims=2**31)),
                             "2,147,483,648 dimensions"),
    "unknown tensor type": (_with_tensor(tensor_info("x", [4], ggml_type=1000)),
                            "type 1000"),
    "rows not whole blocks": (_with_tensor(tensor_info("x", [4, 6], ggml_type=GGML_Q4_0)),
                              "not a whole number"),
    "tensor larger than the file": (_with_tensor(tensor_info("x", [4, 10**12])),
                                    "tensor 'x' (16,000,000,000,000 bytes)"),
    "tensor offset past the end": (_with_tensor(tensor_info("x", [4], offset=2**50)),
                                   "the file ends at byte"),
    "misaligned tensor": (_with_tensor(tensor_info("x", [4], offset=100)),
                          "not a multiple of the alignment"),
    "duplicate tensor": (_with_tensor(tensor_info("token_embd.weight", [4])),
                         "two tensors are named"),
}


def test_the_tiny_files_these_tests_damage_are_valid(tmp_path) -> None:
    """The byte builder is right: gguf's own reader and the walk both accept its model."""
    import gguf

    path = tmp_path / "tiny.gguf"
    path.write_bytes(tiny_model())
    reader = gguf.GGUFReader(path)
    assert reader.fields["tokenizer.ggml.tokens"].contents() == TOKENS
    walked = {t.name: t for t in check_gguf_file(path)}
    for t in reader.tensors:
        assert walked[t.name].offset == t.data_offset - reader.data_offset
        assert walked[t.name].n_bytes == t.n_bytes


@pytest.mark.parametrize("case", list(DAMAGED))
def test_every_kind_of_damage_is_refused_before_gguf_reads_it(tmp_path, monkeypatch,
                                                              case) -> None:
    """Refused by the walk, in one sentence, before ``GGUFReader`` (which would loop over or
    allocate what the header claims) is ever called."""
    import gguf

    data, expected = DAMAGED[case]
    path = tmp_path / "damaged.gguf"
    path.write_bytes(data)
    with pytest.raises(UnreadableGGUFError) as err:
        check_gguf_file(path)
    assert expected in str(err.value) and "\n" not in str(err.value)

    def never(*_args, **_kwargs) -> None:  # noqa: ANN002, ANN003
        raise AssertionError("GGUFReader was called on a damaged file")

    monkeypatch.setattr(gguf, "GGUFReader", never)
    with pytest.raises(TrimError, match=re.escape(expected)):
        open_gguf(path)


def test_a_file_truncated_at_any_byte_is_refused(tmp_path) -> None:
    """Every prefix of a valid file, from the magic to the last data byte."""
    data = tiny_model()
    path = tmp_path / "cut.gguf"
    for size in range(len(data)):
        path.write_bytes(data[:size])
        with pytest.raises(TrimError):
            open_gguf(path)
    path.write_bytes(data)
    assert len(open_gguf(path).tensors) == 2


def test_more_entries_than_any_vocabulary_are_refused_not_read(tmp_path, monkeypatch) -> None:
    """A file whose bytes do hold a giant array: ``GGUFReader`` would build a Python object
    per entry, so past ``MAX_ENTRIES`` it is refused instead."""
    monkeypatch.setattr(gguf_check, "MAX_ENTRIES", 100)
    path = tmp_path / "big.gguf"
    path.write_bytes(_with_kvs(kv_array("general.blob", U8, list(range(100)))))
    with pytest.raises(UnreadableGGUFError, match="more than 100 keys, tensors and array"):
        check_gguf_file(path)


def test_the_real_model_is_walked_as_gguf_reads_it(tmp_path) -> None:
    import gguf

    from app.model_files import default_model_path

    model = default_model_path()
    reader = gguf.GGUFReader(model)
    walked = {t.name: t for t in check_gguf_file(model)}
    assert len(walked) == len(reader.tensors)
    for t in reader.tensors:
        assert walked[t.name].offset == t.data_offset - reader.data_offset
        assert walked[t.name].n_bytes == t.n_bytes


@pytest.mark.parametrize("case, expected", [
    ("tokens of numbers", "holds uint32 items"),
    ("no tokens", "is empty"),
    ("scores of strings", "tokenizer.ggml.scores array holds string items"),
    ("no byte tokens", "lacks 256 of the 256 byte tokens (such as <0x00>)"),
    ("short token types", "lacks a complete tokenizer.ggml.token_type"),
])
def test_tokenizer_arrays_of_the_wrong_type_are_refused(tmp_path, case, expected) -> None:
    kvs = model_kvs()
    if case == "tokens of numbers":
        kvs[2] = kv_array("tokenizer.ggml.tokens", U32, list(range(len(TOKENS))))
    elif case == "no tokens":
        kvs[2] = kv_array("tokenizer.ggml.tokens", STR, [])
    elif case == "no byte tokens":
        kvs[2] = kv_array("tokenizer.ggml.tokens", STR,
                          [t.replace("<0x", "<1x") for t in TOKENS])
    elif case == "scores of strings":
        kvs[3] = kv_array("tokenizer.ggml.scores", STR, ["x"] * len(TOKENS))
    else:
        kvs[4] = kv_array("tokenizer.ggml.token_type", I32, [1])
    path = tmp_path / "odd.gguf"
    path.write_bytes(gguf_file(kvs, *model_tensors()))
    with pytest.raises(TrimError, match=re.escape(expected)):
        token_table(open_gguf(path))


@pytest.mark.parametrize("value, expected", [
    (kv_u32("tokenizer.ggml.padding_token_id", 999), "is 999, not a token id of its 262-token"),
    (kv_str("tokenizer.ggml.padding_token_id", "0"), "is of type string"),
    (kv_array("tokenizer.ggml.padding_token_id", F32, [0.0]), "is of type array"),
])
def test_special_token_ids_outside_the_vocabulary_are_refused(tmp_path, value,
                                                              expected) -> None:
    path = tmp_path / "odd.gguf"
    path.write_bytes(_with_kvs(value))
    reader = open_gguf(path)
    with pytest.raises(TrimError, match=expected):
        special_token_ids(reader, len(token_table(reader)))


def test_the_trimmed_file_is_written_into_new_folders_readable_by_all(tmp_path) -> None:
    model = tmp_path / "tiny.gguf"
    model.write_bytes(tiny_model())
    out = tmp_path / "new" / "folders" / "cut.gguf"
    old_mask = os.umask(0o022)
    try:
        write_trimmed(open_gguf(model), [*range(len(TOKENS) - 3), len(TOKENS) - 1], out,
                      ["en"], "tiny")
    finally:
        os.umask(old_mask)
    assert token_table(open_gguf(out)).tokens == [*TOKENS[:-3], "ab"]
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    assert [p.name for p in out.parent.iterdir()] == ["cut.gguf"]


def test_a_failed_write_leaves_nothing_and_keeps_the_old_file(tmp_path) -> None:
    """Nothing half-written: not the temporary file, not the folders made for it, and an
    earlier file at the target is untouched; an ``OSError`` becomes the caller's error."""
    out = tmp_path / "made" / "here" / "x.gguf"
    with pytest.raises(UsageError, match="disk full"):
        with atomic_output(out, lambda exc: UsageError(exc.strerror)) as tmp:
            tmp.write_bytes(b"half")
            raise OSError(28, "disk full")
    assert list(tmp_path.iterdir()) == []
    kept = tmp_path / "kept.gguf"
    kept.write_bytes(b"old")
    with pytest.raises(KeyboardInterrupt):
        with atomic_output(kept, lambda exc: UsageError(str(exc))) as tmp:
            tmp.write_bytes(b"new")
            raise KeyboardInterrupt
    assert kept.read_bytes() == b"old" and list(tmp_path.iterdir()) == [kept]


def test_devices_and_sockets_are_not_output_files(tmp_path) -> None:
    """Checked without writing anything (a test must never risk replacing /dev/null)."""
    devnull = Path(os.devnull)
    assert not_a_regular_file(devnull) == "a character device"
    with pytest.raises(UsageError, match="is a character device, not a regular file"):
        check_output_path(devnull, "--out", {})
    link = tmp_path / "link.gguf"
    link.symlink_to(devnull)
    with pytest.raises(UsageError, match="character device"):
        check_output_path(link, "--out", {})
    sock_path = tmp_path / "s"
    if len(str(sock_path)) < 100:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(sock_path))
            with pytest.raises(UsageError, match="is a socket"):
                check_output_path(sock_path, "--out", {})


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_folder_no_file_can_be_created_in_is_refused_even_for_root() -> None:
    """``os.access`` says yes to root everywhere; a real probe file does not."""
    with pytest.raises(UsageError, match="cannot create files in /proc"):
        check_output_path(Path("/proc/livetrans-trim-test.gguf"), "--out", {})


def test_an_output_path_that_is_an_input_is_refused_by_any_name(tmp_path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    (tmp_path / "sym.gguf").symlink_to(model)
    os.link(model, tmp_path / "hard.gguf")
    for name in ("m.gguf", "sym.gguf", "hard.gguf"):
        with pytest.raises(UsageError, match="is the model being trimmed"):
            check_output_path(tmp_path / name, "--out", {"the model being trimmed": model})


# the command a user runs


def _cli(*args: str, limit_memory: int | None = None,
         prefix: list[str] | None = None) -> subprocess.CompletedProcess:
    """``livetrans trim-vocab --langs en,de ARGS``; ``limit_memory``: bytes of data the
    process may map (``RLIMIT_DATA``: its heap and anonymous memory, not its libraries);
    ``prefix``: a command it runs under (``AS_A_USER``)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_DATA, (limit_memory, limit_memory))

    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    return subprocess.run([*(prefix or []), LIVETRANS, "trim-vocab", "--langs", "en,de",
                           *args],
                          capture_output=True, text=True, timeout=300, env=env,
                          stdin=subprocess.DEVNULL,
                          preexec_fn=None if limit_memory is None else limit)


def _assert_one_line(proc: subprocess.CompletedProcess, expected: str) -> str:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], proc.stderr
    return lines[0]


def _truncated_real_model(path: Path, size: int) -> Path:
    """The bundled model cut to ``size`` bytes, written sparsely (its header, then a hole):
    a download that stopped, without copying 250 MB."""
    from app.model_files import default_model_path

    model = default_model_path()
    with model.open("rb") as src, path.open("wb") as dst:
        dst.write(src.read(min(size, 8 << 20)))
        dst.truncate(size)
    return path


@pytest.mark.parametrize("size, expected", [
    (200, "the key count claims"),
    (3_000_000, "of key 'tokenizer.ggml.tokens'"),
    (6_515_000, "of tensor"),  # in the tensor descriptions
    (253_113_023, "the file ends at byte 253,113,023"),  # one byte short
])
def test_a_truncated_model_is_one_line_and_nothing_is_written(tmp_path, size,
                                                              expected) -> None:
    from app.model_files import default_model_path

    if default_model_path().stat().st_size != 253_113_024:
        pytest.skip("another build of the bundled model")
    model = _truncated_real_model(tmp_path / "cut.gguf", size)
    out = tmp_path / "out" / "trimmed.gguf"
    line = _assert_one_line(_cli("--model", str(model), "--out", str(out)),
                            "cannot trim cut.gguf: the file is damaged or truncated")
    assert expected in line
    assert not (tmp_path / "out").exists()


def test_a_huge_claimed_array_is_refused_without_the_memory_it_claims(tmp_path) -> None:
    """A header that claims a billion entries its bytes do not hold: refused within a
    memory limit far below what reading them would allocate (gguf's reader builds a numpy
    view per entry: some 150 GB here)."""
    model = tmp_path / "huge.gguf"
    model.write_bytes(_with_kvs(kv_array("general.blob", U8, [1], length=10**9)))
    proc = _cli("--model", str(model), "--out", str(tmp_path / "x.gguf"),
                limit_memory=1 << 30)
    _assert_one_line(proc, "key 'general.blob' claims 1,000,000,000 entries")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["huge.gguf"]


def test_a_model_llama_cpp_cannot_load_is_one_line(tmp_path) -> None:
    kvs = [kv_str("general.architecture", "no-such-architecture"), *model_kvs()[1:]]
    model = tmp_path / "odd.gguf"
    model.write_bytes(gguf_file(kvs, *model_tensors()))
    _assert_one_line(_cli("--model", str(model), "--out", str(tmp_path / "x.gguf")),
                     "llama.cpp cannot load its vocabulary")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["odd.gguf"]


def test_a_tiny_model_is_trimmed_into_folders_that_do_not_exist_yet(tmp_path) -> None:
    model = tmp_path / "tiny.gguf"
    model.write_bytes(tiny_model())
    out = tmp_path / "a" / "b" / "cut.gguf"
    report = tmp_path / "c" / "report.json"
    proc = _cli("--model", str(model), "--out", str(out), "--report", str(report))
    assert proc.returncode == 0, proc.stderr
    assert out.is_file() and report.is_file()
    assert token_table(open_gguf(out)).tokens == TOKENS


def _out_cases(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    """The ``--out``/``--report`` a user can get wrong: arguments, words of the refusal."""
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    link = tmp_path / "link.gguf"
    link.symlink_to(fifo)
    corpus = tmp_path / "de.txt"
    corpus.write_text("Hallo Welt.\n")
    out = str(tmp_path / "out.gguf")
    return {
        "parent is a file": (["--out", str(a_file / "x.gguf")], "is a file, not a folder"),
        "grandparent is a file": (["--out", str(a_file / "sub" / "x.gguf")],
                                  "is a file, not a folder"),
        "a fifo": (["--out", str(fifo)], "is a named pipe (FIFO), not a regular file"),
        "a link to a fifo": (["--out", str(link)], "is a named pipe (FIFO)"),
        "a folder": (["--out", str(tmp_path)], "is a folder"),
        "a corpus": (["--out", str(corpus), "--corpus", f"de={corpus}"],
                     "is the --corpus/--check file de="),
        "report under a file": (["--out", out, "--report", str(a_file / "r.json")],
                                "--report"),
        "report is the out file": (["--out", out, "--report", out], "is the --out file"),
        "report is a fifo": (["--out", out, "--report", str(fifo)], "named pipe"),
    }


@pytest.mark.parametrize("case", ["parent is a file", "grandparent is a file", "a fifo",
                                  "a link to a fifo", "a folder", "a corpus",
                                  "report under a file", "report is the out file",
                                  "report is a fifo"])
def test_an_output_that_cannot_be_written_is_refused_before_the_model_is_read(
        tmp_path, case) -> None:
    """The model given is truncated: a refusal naming the output, not the model, shows the
    output was checked before any work began."""
    args, expected = _out_cases(tmp_path)[case]
    before = {p: p.stat().st_mode for p in tmp_path.rglob("*")}
    model = tmp_path / "cut.gguf"
    model.write_bytes(tiny_model()[:300])
    line = _assert_one_line(_cli("--model", str(model), *args), expected)
    assert "cut.gguf" not in line
    model.unlink()
    assert {p: p.stat().st_mode for p in tmp_path.rglob("*")} == before  # nothing written
    assert stat.S_ISFIFO((tmp_path / "pipe.gguf").stat().st_mode)


@pytest.mark.parametrize("case", ["folder not writable", "file read-only"])
def test_an_output_without_permission_is_refused(tmp_path, case) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    target = locked / "x.gguf"
    if case == "file read-only":
        target.write_bytes(b"keep")
        target.chmod(0o444)
        expected = "is read-only"
    else:
        locked.chmod(0o555)
        expected = "permission denied"
    try:
        model = tmp_path / "tiny.gguf"
        model.write_bytes(tiny_model())
        _assert_one_line(_cli("--model", str(model), "--out", str(target),
                              prefix=AS_A_USER), expected)
    finally:
        locked.chmod(0o755)
    assert sorted(p.name for p in locked.iterdir()) == (["x.gguf"] if case ==
                                                        "file read-only" else [])
