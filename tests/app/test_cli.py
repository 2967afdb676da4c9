"""``livetrans`` subcommands end user mistakes with one line on stderr and exit code 2.

Each case runs the installed entry point in a subprocess, as a user would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import free_port

LIVETRANS = shutil.which("livetrans", path=str(Path(sys.executable).parent)) or "livetrans"


def _run(*args: str, stdin: str = "", timeout: float = 120, **env: str):
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LIVETRANS_")}
    environ.update(env)
    return subprocess.run([LIVETRANS, *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=environ)


def _one_line_error(proc, *expected: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("args, env, expected", [
    (["serve", "--omp-wait-policy", "fast"], {}, ["--omp-wait-policy", "'auto', 'active'"]),
    (["serve"], {"LIVETRANS_OMP_WAIT_POLICY": "fast"}, ["LIVETRANS_OMP_WAIT_POLICY"]),
    (["serve", "--model", "/no/such/model.gguf"], {}, ["/no/such/model.gguf"]),
    (["serve", "--log-level", "loud"], {}, ["--log-level", "'debug'"]),
    (["serve"], {"LIVETRANS_LOG_LEVEL": "verbose"}, ["LIVETRANS_LOG_LEVEL"]),
    (["serve", "--prompt-format", "foo"], {}, ["--prompt-format", "'few-shot'"]),
    (["serve", "--port", "eighty"], {}, ["--port"]),
    (["serve", "--cors-origin", "example.com"], {}, ["--cors-origin", "not an origin"]),
    (["serve", "--api-key-file", "/no/keys.txt"], {}, ["--api-key-file", "/no/keys.txt"]),
    (["serve", "--dict-dir", "/no/dicts"], {}, ["--dict-dir", "/no/dicts"]),
    # nothing listens on port 1: Redis unreachable at start is one line, exit 2
    (["serve", "--room-bus", "redis://127.0.0.1:1/0"], {}, ["--room-bus", "127.0.0.1:1"]),
    (["serve"], {"LIVETRANS_ROOM_BUS": "http://x"}, ["LIVETRANS_ROOM_BUS", "redis://"]),
    (["serve", "--data-dir", "/proc/livetrans"], {}, ["--data-dir", "/proc/livetrans"]),
    (["serve", "--no-such-flag"], {}, ["unrecognized arguments: --no-such-flag"]),
    (["no-such-command"], {}, ["invalid choice"]),
    # comma-separated lists parse (the model is what is missing here, not the keys)
    (["serve", "--model", "/no/m.gguf"],
     {"LIVETRANS_API_KEYS": "a,b", "LIVETRANS_CORS_ORIGINS": "https://x.example,http://y:3000"},
     ["Model file not found"]),
    (["bench", "engine"],
     {"LIVETRANS_OMP_WAIT_POLICY": "fast"}, ["LIVETRANS_OMP_WAIT_POLICY", "auto"]),
    (["bench", "engine", "--omp-wait-policy", "bogus"], {}, ["--omp-wait-policy", "'bogus'"]),
    (["eval", "--omp-wait-policy=bogus"], {}, ["--omp-wait-policy", "'bogus'"]),
    (["eval", "--out", "{tmp}/out"], {"LIVETRANS_OMP_WAIT_POLICY": "sleepy"},
     ["LIVETRANS_OMP_WAIT_POLICY"]),
    (["eval", "--out", "{tmp}/out"], {}, ["FLORES", "--flores-dir"]),
    (["eval", "--dataset", "acl", "--out", "{tmp}/out"], {}, ["--acl-dir"]),
    (["eval", "--flores-dir", "{tmp}", "--methods", "nonsense", "--out", "{tmp}/out"], {},
     ["--methods", "unknown method 'nonsense'"]),
    (["eval", "--report-only", "--out", "{tmp}/empty"], {}, ["no records", "--report-only"]),
    (["fertility", "--file", "de"], {}, ["--file", "not LANG=PATH"]),
    (["bench", "engine", "--ks", "1,a"], {}, ["--ks", "'a'"]),
    (["emulate", "--flores-dir", "{tmp}", "--mono-dir", "{tmp}", "--orders", "n9"], {},
     ["--orders", "'n9'"]),
    (["eval", "--betas", "0.2,1.5", "--out", "{tmp}/out"], {}, ["--betas", "'1.5'"]),
    (["bench", "drafters", "--flores-dir", "{tmp}", "--chains", "ngram;trie"], {},
     ["--chains", "'trie'"]),
    (["eval", "--dataset", "asr", "--out", "{tmp}/out"], {}, ["--asr-file"]),
    (["eval", "--flores-dir", "{tmp}/none", "--out", "{tmp}/out"], {}, ["not found"]),
    (["bench", "engine", "--model", "/no/such/model.gguf"], {}, ["/no/such/model.gguf"]),
    (["build-dict", "--corpus", "/no/corpus.txt", "--lang", "de", "--out", "{tmp}/d.dict"],
     {}, ["/no/corpus.txt"]),
    (["build-trigram", "--corpus", "{tmp}/plain.txt", "--lang", "german", "--out",
      "{tmp}/t.npz"], {}, ["--lang", "Unsupported language 'german'"]),
    (["caption", "--file", "/no/partials.jsonl"], {}, ["/no/partials.jsonl"]),
    (["caption", "--stdin", "--server", "http://127.0.0.1:{port}"], {}, ["cannot reach"]),
    (["caption", "--file", "{tmp}/plain.txt", "--server", "http://127.0.0.1:{port}"], {},
     ["plain.txt line 1", "not JSON"]),
    (["load-test", "--asr-file", "/no/file.jsonl"], {}, ["/no/file.jsonl"]),
    # serve --langs: the event's languages, each known and named once
    (["serve", "--langs", "en,xx"], {}, ["--lang", "Unsupported language 'xx'"]),
    (["serve", "--langs", "en,de,en"], {}, ["--lang", "'en' is named twice"]),
    (["serve"], {"LIVETRANS_LANGS": "en,klingon"}, ["LIVETRANS_LANGS", "'klingon'"]),
    (["serve", "--langs", "en,de", "--corpus", "ja={tmp}/plain.txt"], {},
     ["--corpus", "ja is not in --langs"]),
    (["serve", "--langs", "en,de", "--corpus", "de={tmp}/none.txt"], {},
     ["--corpus", "no such file"]),
])
def test_user_mistakes_are_one_line_and_exit_2(tmp_path, args, env, expected) -> None:
    (tmp_path / "plain.txt").write_text("just some words\n")
    port = str(free_port())  # nothing listens there
    args = [a.replace("{tmp}", str(tmp_path)).replace("{port}", port) for a in args]
    _one_line_error(_run(*args, **env), *expected)


def test_caption_stdin_fed_plain_text_is_one_line(live_server) -> None:
    proc = _run("caption", "--stdin", "--quiet", "--server", live_server.url,
                stdin="hello world, this is not JSON\n")
    _one_line_error(proc, "stdin line 1", "not JSON")
    proc = _run("caption", "--stdin", "--quiet", "--server", live_server.url,
                stdin='{"type": "partial", "text": "Hello"}\n{"text": "no type"}\n')
    _one_line_error(proc, "stdin line 2", '"type"')


def test_bench_names_its_benchmarks_and_old_names_still_run(capsys) -> None:
    """``livetrans bench`` (or ``--list``) lists the benchmarks; an old command (``bench-bus``)
    or a bare engine option (``livetrans bench --ks``) is a one-line notice, then the same
    benchmark; a name that is none is one line naming the closest."""
    from app.cli import BENCH_ALIASES, BENCHMARKS, main

    for argv in (["bench"], ["bench", "--list"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert all(f"  {name} " in out for name in BENCHMARKS), out
    assert set(BENCH_ALIASES.values()) <= set(BENCHMARKS)
    with pytest.raises(SystemExit):
        main(["bench-bus", "--help"])
    captured = capsys.readouterr()
    assert captured.err.strip() == "livetrans bench-bus is deprecated: use 'livetrans bench bus'"
    assert captured.out.startswith("usage: livetrans bench bus")
    proc = _run("bench", "--ks", "1,a")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 2, proc.stderr
    assert "livetrans bench engine" in lines[0] and "'a'" in lines[1]
    _one_line_error(_run("bench", "engin"), "no benchmark 'engin'", "did you mean 'engine'")


def test_help_still_exits_0() -> None:
    for args in (["--help"], ["serve", "--help"], ["caption", "--help"]):
        proc = _run(*args)
        assert proc.returncode == 0 and "usage" in proc.stdout.lower(), proc.stderr


def test_a_subcommand_without_its_extra_says_which_to_install(monkeypatch, capsys) -> None:
    import importlib

    from app.cli import main

    real = importlib.import_module

    def missing(name: str, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        if name == "eval.harness":
            raise ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", missing)
    assert main(["eval", "--help"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'livetrans[eval]'" in err and "Traceback" not in err


@pytest.mark.parametrize("command", ["load-test", "caption", "bench concurrency", "eval",
                                     "build-dict"])
def test_help_is_plain_text_with_defaults(command, capsys) -> None:
    from app.cli import main

    with pytest.raises(SystemExit):
        main([*command.split(), "--help"])
    out = capsys.readouterr().out
    assert "``" not in out and "usage: livetrans " + command in out
    assert "(default:" in out or "default:" in out


# -- the model file, the listening address, a client without a server ------------------------

def test_a_file_that_is_no_gguf_is_refused_before_serving(tmp_path) -> None:
    text = tmp_path / "README.md"
    text.write_text("# not a model\n")
    _one_line_error(_run("serve", "--model", str(text)), "not a GGUF model file")
    _one_line_error(_run("serve", "--model", str(tmp_path)), "is a folder")
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    _one_line_error(_run("serve", "--model", str(empty)), "not a GGUF model file")


def test_a_damaged_gguf_is_refused_before_serving(tmp_path) -> None:
    damaged = tmp_path / "damaged.gguf"
    damaged.write_bytes(b"GGUF\x03\x00\x00\x00" + os.urandom(64))
    _one_line_error(_run("serve", "--model", str(damaged), "--port", str(free_port())),
                    "cannot load", str(damaged))


def test_a_busy_port_and_a_bad_host_are_one_line() -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        _one_line_error(_run("serve", "--port", str(port)), f"port {port}", "in use", "--port")
    _one_line_error(_run("serve", "--host", "no-such-host.invalid"), "--host")


@pytest.mark.parametrize("langs", ["xx", "de,klingon", "zz_Zzzz"])
def test_an_unknown_language_is_named_with_the_supported_ones(langs, tmp_path) -> None:
    line = _one_line_error(_run("eval", "--langs", langs, "--out", str(tmp_path)),
                           "Unsupported language")
    assert "de" in line and "zh" in line


def test_the_sdk_example_without_a_server_is_one_line(tmp_path) -> None:
    port = free_port()  # nothing listens there
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LIVETRANS_")}
    environ["LIVETRANS_SERVER"] = f"http://127.0.0.1:{port}"
    sample = Path(__file__).resolve().parents[2] / "eval" / "samples" / "asr_sample_en.jsonl"
    for args, expected in (
        (["--file", str(sample)], f"127.0.0.1:{port}"),  # LIVETRANS_SERVER is honoured
        (["--file", str(tmp_path / "missing.jsonl")], "no such file"),
        ([], "--file"),
    ):
        proc = subprocess.run([sys.executable, "-m", "clients.openai_retranslation", *args],
                              capture_output=True, text=True, timeout=120, env=environ)
        _one_line_error(proc, expected)


# -- the class of each mistake above, not only its first example -----------------------------

SAMPLE = Path(__file__).resolve().parents[2] / "eval" / "samples" / "asr_sample_en.jsonl"
SDK = [sys.executable, "-m", "clients.openai_retranslation"]
CAPTION = [sys.executable, "-m", "clients.caption"]


def _run_module(argv: list[str], timeout: float = 300, **env: str):
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LIVETRANS_")}
    environ.update(env)
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=environ,
                          stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def keyed_server():
    from tests.conftest import LiveServer

    with LiveServer(api_keys=["cli-key"], parallel=1) as server:
        yield server


@pytest.mark.parametrize("args, expected", [
    (["serve", "--host", "999.1.1.1"], ["--host", "999.1.1.1"]),
    (["serve", "--host", "192.0.2.1"], ["cannot listen on 192.0.2.1"]),  # not this machine's
    (["serve", "--port", "99999"], ["--port", "65535"]),
    ([], ["required", "COMMAND"]),
    (["eval", "--langs", "de,en", "--out", "{tmp}/out"], ["en is the source language"]),
    (["eval", "--source-lang", "xx", "--out", "{tmp}/out"], ["Unsupported language 'xx'"]),
    (["caption", "--file", str(SAMPLE), "--server", "ftp://127.0.0.1:1"],
     ["unsupported scheme", "http://HOST:PORT"]),
    (["caption", "--file", str(SAMPLE), "--server", "http://127.0.0.1:port"],
     ["port is not a number"]),
    (["caption", "--file", "{tmp}/no_text.jsonl", "--server", "http://127.0.0.1:1"],
     ["no_text.jsonl line 1, event 2", '"text"']),
    (["caption", "--file", "{tmp}/bad_time.jsonl"], ["bad_time.jsonl line 1, event 1", "'t'"]),
    (["caption", "--file", "{tmp}/empty.jsonl"], ["no utterances"]),
    (["caption", "--file", "{tmp}"], ["is a folder, not a file"]),
    (["caption", "--file", str(SAMPLE), "--limit", "0"], ["--limit", "'0'", ">= 1"]),
    (["caption", "--file", str(SAMPLE), "--target-lang", ","], ["--target-lang"]),
    (["load-test", "--asr-file", str(SAMPLE), "--server", "http://192.0.2.1:8000"],
     ["loopback"]),
    (["load-test", "--asr-file", str(SAMPLE), "--server", "127.0.0.1:{port}"],
     ["cannot reach", "livetrans serve"]),
    (["load-test", "--asr-file", "{tmp}/no_text.jsonl", "--server", "127.0.0.1:{port}"],
     ["no_text.jsonl line 1"]),
    (["load-test", "--asr-file", str(SAMPLE), "--sessions", "0"], ["--sessions", "'0'"]),
    (["load-test", "--asr-file", str(SAMPLE), "--speed", "0"], ["--speed", "'0'"]),
])
def test_more_mistakes_of_each_class_are_one_line(tmp_path, args, expected) -> None:
    good = {"t": 0.5, "type": "partial", "text": "Hello"}
    (tmp_path / "no_text.jsonl").write_text(json.dumps(
        {"events": [good, {"type": "final", "txt": "Hello."}]}) + "\n")
    (tmp_path / "bad_time.jsonl").write_text(json.dumps(
        {"events": [dict(good, t="soon")]}) + "\n")
    (tmp_path / "empty.jsonl").write_text("\n")
    port = str(free_port())  # nothing listens there
    args = [a.replace("{tmp}", str(tmp_path)).replace("{port}", port) for a in args]
    _one_line_error(_run(*args), *expected)


@pytest.mark.parametrize("argv, expected", [
    (SDK + ["--file", str(SAMPLE), "--server", "ftp://127.0.0.1:1"], ["unsupported scheme"]),
    (SDK + ["--file", "{tmp}/no_text.jsonl"], ["no_text.jsonl line 1, event 1"]),
    (SDK + ["--file", str(SAMPLE), "--limit", "0"], ["--limit", "'0'"]),
    (SDK + ["--file", "{tmp}"], ["is a folder"]),
    # the caption client run as a module is as strict as `livetrans caption`
    (CAPTION + ["--file", "/no/partials.jsonl"], ["livetrans caption", "/no/partials.jsonl"]),
    (CAPTION + ["--stdin", "--server", "http://127.0.0.1:{port}"], ["cannot reach"]),
])
def test_the_client_modules_are_one_line_too(tmp_path, argv, expected) -> None:
    (tmp_path / "no_text.jsonl").write_text(json.dumps({"events": [{"type": "final"}]}) + "\n")
    port = str(free_port())
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{port}", port) for a in argv]
    _one_line_error(_run_module(argv), *expected)


def test_a_key_the_server_refuses_is_one_line_for_every_client(keyed_server) -> None:
    server = keyed_server.url
    for key in ([], ["--api-key", "wrong"]):
        _one_line_error(_run("caption", "--file", str(SAMPLE), "--limit", "1", "--fast",
                             "--quiet", "--server", server, *key),
                        "invalid API key", "--api-key")
        _one_line_error(_run_module(SDK + ["--file", str(SAMPLE), "--limit", "1",
                                           "--server", server, *key]),
                        "401", "--api-key")
        _one_line_error(_run("load-test", "--asr-file", str(SAMPLE), "--sessions", "1",
                             "--updates", "2", "--server", server, *key),
                        "needs an API key", "--api-key")


def test_a_server_that_is_no_livetrans_is_one_line(live_server) -> None:
    wrong = live_server.url + "/not-here"  # a livetrans server, but a path it does not serve
    _one_line_error(_run("caption", "--file", str(SAMPLE), "--fast", "--quiet",
                         "--server", wrong), "cannot reach", "/not-here/v1/live")
    _one_line_error(_run_module(SDK + ["--file", str(SAMPLE), "--limit", "1",
                                       "--server", wrong]), "404")
    _one_line_error(_run("load-test", "--asr-file", str(SAMPLE), "--server", wrong),
                    "404", "livetrans server")


def test_a_room_the_server_refuses_is_one_line(live_server) -> None:
    _one_line_error(_run("caption", "--file", str(SAMPLE), "--fast", "--quiet", "--server",
                         live_server.url, "--room", "no spaces allowed"),
                    "refused the session", "invalid_room")


def test_a_server_that_goes_away_mid_stream_is_one_line() -> None:
    """A server that drops the connection after ``start`` (killed, crashed): the client
    says so in one line, and its reader task leaves no 'exception never retrieved'."""
    import asyncio
    import threading

    import websockets

    ready = threading.Event()
    stop: dict[str, object] = {}
    port = free_port()

    async def drop_after_start(ws) -> None:  # noqa: ANN001
        await ws.recv()  # the client's start
        await ws.send(json.dumps({"type": "ready", "langs": ["de"]}))
        await ws.recv()  # its first update, then the machine "dies"
        ws.transport.abort()

    async def serve() -> None:
        async with websockets.serve(drop_after_start, "127.0.0.1", port):
            loop = asyncio.get_running_loop()
            stop["event"] = done = asyncio.Event()
            stop["loop"] = loop
            ready.set()
            await done.wait()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(30)
    try:
        proc = _run("caption", "--file", str(SAMPLE), "--quiet",
                    "--server", f"http://127.0.0.1:{port}")
    finally:
        stop["loop"].call_soon_threadsafe(stop["event"].set)  # type: ignore[union-attr]
        thread.join(30)
    line = _one_line_error(proc, "the server went away")
    assert "exception was never retrieved" not in proc.stderr, line


@pytest.mark.parametrize(("patch", "problem"), [
    ((b"{% endfor %}", b"{% endfox %}"), "fails to render"),
    ((b"add_generation_prompt", b"add_generation_prompX"), "no generation prompt"),
    ((b"message['content']", b"message['role']   "), "drops the user turn"),
])
def test_a_chat_template_that_cannot_carry_the_prompt_is_one_line(tmp_path, patch,
                                                                  problem) -> None:
    """Served, such a model would answer with the template's own text: ``serve`` stops
    first, naming the model and ``--prompt-format``."""
    from app.model_files import ModelFileError, smollm2_model_path

    try:
        original = smollm2_model_path().read_bytes()
    except ModelFileError as exc:
        pytest.skip(str(exc))
    assert original.count(patch[0]) == 1
    broken = tmp_path / "broken-template.gguf"
    broken.write_bytes(original.replace(*patch))  # same length: the GGUF stays valid
    _one_line_error(_run("serve", "--model", str(broken), "--port", str(free_port())),
                    "broken-template.gguf", problem, "--prompt-format")
