"""``livetrans``: one entry point with subcommands (serve, bench, build-dict, emulate, ...).

What a user can fix ends in one line on stderr and exit code 2, for every subcommand: a bad
option or setting (with its choices), a missing model, file or folder, an unreachable
server, malformed input. ``main`` is the one place that turns those into that line
(``UsageError`` and the few typed errors below); everything else keeps its traceback.
"""

from __future__ import annotations

import argparse
import difflib
import logging
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from app.commands import (
    BENCH_ALIASES,
    BENCHMARKS,
    DELEGATED,
    delegate,
    run_bench,
    run_bench_alias,
    tool_omp_policy,
)
from app.engine.cpu_threads import configure_omp_wait
from app.logs import configure_logging
from app.model_files import ModelFileError, resolve_model_path
from app.settings import (
    FLAT,
    PLURAL_ONLY,
    Settings,
    SettingsError,
    load_settings,
)
from app.startup_log import listen_url
from app.usage import (
    EXIT_USAGE,
    PlainHelp,
    UsageError,
    one_line_argparse_errors,
)


def _add_settings_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per setting (its flat name: ``app.settings.FLAT``), grouped by subsystem
    (the model's, then the server's); defaults come from env vars (LIVETRANS_*)."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for name, where in FLAT.items():
        if where.group not in groups:
            groups[where.group] = parser.add_argument_group(where.group)
        _add_setting_flag(groups[where.group], name)


def _add_setting_flag(parser: argparse._ArgumentGroup, name: str) -> None:
    """The flag of one setting, its help naming its variable and default."""
    field = FLAT[name].field
    flag = "--" + name.replace("_", "-")
    env = "LIVETRANS_" + name.upper()
    default = field.get_default(call_default_factory=True)
    shown = "" if default in (None, [], False) else f"; default {default}"
    help_text = f"{field.description or name} (env {env}{shown})"
    annotation = str(field.annotation)
    if field.annotation is bool:
        parser.add_argument(flag, action="store_true", default=None, help=help_text)
    elif "list" in annotation:
        singular = flag[:-1] if flag.endswith("s") and not flag.endswith("us") else flag
        if name in PLURAL_ONLY:
            singular = flag
        spellings = [singular, flag] if singular != flag else [flag]
        parser.add_argument(*spellings, dest=name, action="append", default=None,
                            help=help_text + " (repeatable; comma-separated values too)")
    else:
        parser.add_argument(flag, dest=name, default=None, help=help_text)


def serve_settings(args: argparse.Namespace) -> Settings:
    """The settings ``serve``'s flags name, the rest from ``LIVETRANS_*`` or defaults."""
    overrides = {
        name: getattr(args, name)
        for name in FLAT
        if getattr(args, name, None) is not None
    }
    return load_settings(**overrides)


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    settings = serve_settings(args)
    settings.check_files()
    configure_omp_wait(settings.omp_wait_policy)  # before llama.cpp loads
    # a bad model (or chat template) is one line now, not in a thread
    _check_model_loads(settings.model, settings.prompt_format)
    configure_logging(settings.logs.level, settings.logs.format)
    check_listen_address(settings.http.host, settings.http.port)
    check_room_store(settings.rooms.bus, settings.rooms.data_dir)
    # the checks passed (a failure above is one line and nothing else): say at once what
    # is started, as loading takes from seconds to minutes
    logging.getLogger("livetrans.startup").info("%s", starting_line(settings))
    from app.server import create_app

    failures: list[str] = []
    server = None

    def stop_on_load_error(message: str) -> None:
        failures.append(message)
        if server is not None:
            server.should_exit = True

    app = create_app(settings, on_load_error=stop_on_load_error)
    # uvicorn's access log is off (the server logs each request once, with its id) and its
    # own log config is not applied (its loggers go through ours, text or JSON)
    config = uvicorn.Config(app, host=settings.http.host, port=settings.http.port,
                            log_level=settings.logs.level, access_log=False, log_config=None,
                            timeout_graceful_shutdown=int(settings.scheduling.shutdown_grace_s))
    server = GracefulServer(config)
    server.run()
    if failures:
        raise UsageError(f"{failures[0]} ({settings.model or 'the bundled model'})")
    return 0


def starting_line(settings: Settings) -> str:
    """``starting livetrans: model X from FOLDER, ...``: what ``serve`` is about to load
    and whether it trims the vocabulary (``app.vocab_trim.auto``)."""
    path = resolve_model_path(settings.model)
    langs = settings.languages.langs
    if not langs:
        trim = "served as it is (no --langs)"
    elif settings.languages.no_trim:
        trim = f"its full vocabulary (--no-trim), serving {','.join(langs)}"
    else:
        trim = (f"trimmed to {','.join(langs)} (--langs: a copy made on the first "
                "start and reused after)")
    return (f"starting livetrans {_version()}: model {path.name} from {path.parent}, {trim}; "
            f"it serves {listen_url(settings.http.host, settings.http.port)} once the model is "
            "loaded: wait for the 'ready:' line")


def _check_model_loads(model: str | None, prompt_format: str | None = None) -> None:
    """The file exists, is GGUF, llama.cpp reads its header and vocabulary (no weights:
    a fraction of a second), and its chat template can carry the prompt, so a broken file
    is refused before the server starts."""
    from app.loader import load_vocab, prompt_format_of

    path = resolve_model_path(model)
    llama_log = logging.getLogger("livetrans.llama")  # its C error lines; ours is the one
    llama_log.disabled = True
    try:
        vocab = load_vocab(path)
    except RuntimeError:
        raise UsageError(f"llama.cpp cannot load {path}: the file is damaged or not a "
                         "model llama.cpp supports") from None
    finally:
        llama_log.disabled = False
    try:
        prompt_format_of(vocab, path, prompt_format)
    finally:
        vocab.close()


def check_room_store(room_bus: str | None, data_dir: Path) -> None:
    """Where rooms and transcripts live answers, or ``serve`` stops with one line (exit 2):
    Redis at ``--room-bus``, else a writable ``--data-dir`` for the transcripts' SQLite."""
    if room_bus is not None:
        from app.rooms.bus import BusUnavailable
        from app.rooms.bus.redis_bus import probe

        try:
            probe(room_bus)
        except BusUnavailable as exc:
            raise UsageError(f"--room-bus: {exc}") from None
        return
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        probe_file = data_dir / ".write-test"
        probe_file.write_bytes(b"")
        probe_file.unlink()
    except OSError as exc:
        raise UsageError(f"--data-dir {data_dir}: cannot write there "
                         f"({exc.strerror or type(exc).__name__})") from None


def check_listen_address(host: str, port: int) -> None:
    """Fail with one line before uvicorn tries (its own failure is several log lines and
    exit code 3): a port in use, a host that is no address of this machine."""
    import errno
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise UsageError(f"cannot listen on --host {host!r}: {exc}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise UsageError(f"port {port} on {host} is in use (another server?); "
                                 "pass --port with a free port") from None
            if exc.errno == errno.EACCES:
                raise UsageError(f"no permission to listen on port {port}; pass --port "
                                 "1024 or above") from None
            raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


def _graceful_server_class():
    import asyncio
    from time import monotonic as loop_time

    import uvicorn

    class _GracefulServer(uvicorn.Server):
        """On SIGTERM/SIGINT: stop accepting work, let live sessions flush their finals.
        Once listening, it tells the app's ready line where (``app.startup_log``)."""

        async def startup(self, sockets=None) -> None:  # noqa: ANN001 - uvicorn's signature
            await super().startup(sockets=sockets)
            ready_line = getattr(self.config.app.state, "ready_line", None)
            if self.started and ready_line is not None and self.servers:
                host, port = self.servers[0].sockets[0].getsockname()[:2]
                scheme = "https" if self.config.ssl else "http"
                ready_line.listening(listen_url(self.config.host or host, port, scheme))

        def handle_exit(self, sig, frame) -> None:  # noqa: ANN001 - uvicorn's signature
            # uvicorn closes open WebSockets (1012) as soon as it starts shutting down, so
            # first let live connections flush their finals and close themselves (1001).
            state = self.config.app.state.livetrans
            if state.shutting_down or not state.live_connections:
                state.stop_taking_work()  # the grace counts from the first signal
                super().handle_exit(sig, frame)
                return
            loop = asyncio.get_event_loop()
            loop.call_soon_threadsafe(lambda: loop.create_task(self._drain(sig, frame, state)))

        async def _drain(self, sig, frame, state) -> None:  # noqa: ANN001
            state.begin_shutdown()
            deadline = loop_time() + self.config.timeout_graceful_shutdown
            while state.live_connections and loop_time() < deadline:
                await asyncio.sleep(0.05)
            super().handle_exit(sig, frame)

    return _GracefulServer


def GracefulServer(config):  # noqa: N802 - reads as a class at the call site
    return _graceful_server_class()(config)


# Which extra installs the third-party modules a subcommand imports (pyproject's extras).
def _connection_errors() -> tuple[type[BaseException], ...]:
    """Errors meaning "the server is not there" from the HTTP and WebSocket clients."""
    errors: list[type[BaseException]] = [ConnectionError]
    try:
        import httpx

        errors.append(httpx.TransportError)
    except ImportError:  # pragma: no cover - httpx is a dependency
        pass
    try:
        from websockets.exceptions import InvalidHandshake, InvalidURI

        errors += [InvalidHandshake, InvalidURI]
    except ImportError:  # pragma: no cover - websockets is a dependency
        pass
    return tuple(errors)


def _one_line(text: str) -> str:
    return " ".join(str(text).split()) or "failed"


def closest_options(parser: argparse.ArgumentParser, message: str) -> list[str]:
    """The parser's options nearest to the first unknown one in argparse's ``message``
    ("unrecognized arguments: --lang en,de" -> ``["--langs"]``): those it abbreviates,
    else the most similar spellings; for a command that is none, the nearest command."""
    choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
    if choice is not None:
        commands = re.findall(r"'([^']*)'", choice.group(2))
        return difflib.get_close_matches(choice.group(1), commands, n=1, cutoff=0.6)
    if not message.startswith("unrecognized arguments:"):
        return []
    unknown = next((word.split("=", 1)[0] for word in message.split(":", 1)[1].split()
                    if word.startswith("--")), None)
    if unknown is None:
        return []
    known = sorted(o for o in parser._option_string_actions if o.startswith("--"))
    longer = [o for o in known if o.startswith(unknown)]
    return longer[:3] or difflib.get_close_matches(unknown, known, n=2, cutoff=0.6)


@contextmanager
def whole_option_names() -> Iterator[None]:
    """While active, every parser (``serve``'s and each delegated tool's, made in its own
    module) takes whole option names only, as ``allow_abbrev=False`` does, and a refused
    option names the closest real one. argparse otherwise reads ``--lang`` as ``--langs``
    (any unambiguous prefix), so a misspelling silently starts a server."""
    parse, error = argparse.ArgumentParser.parse_known_args, argparse.ArgumentParser.error

    def parse_whole(self, args=None, namespace=None):  # noqa: ANN001, ANN202 - argparse's
        self.allow_abbrev = False
        return parse(self, args, namespace)

    def error_naming_closest(self, message: str):  # noqa: ANN202 - argparse's signature
        closest = closest_options(self, message)
        if closest:
            message += f"; did you mean {' or '.join(closest)}?"
        error(self, message)

    argparse.ArgumentParser.parse_known_args = parse_whole  # type: ignore[method-assign]
    argparse.ArgumentParser.error = error_naming_closest  # type: ignore[method-assign]
    try:
        yield
    finally:
        argparse.ArgumentParser.parse_known_args = parse  # type: ignore[method-assign]
        argparse.ArgumentParser.error = error  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; user mistakes are one line on stderr and exit code 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    prog = "livetrans" + (f" {argv[0]}" if argv and argv[0] in {"serve", *DELEGATED} else "")
    if argv and (argv[0] in BENCH_ALIASES or argv[0] == "bench"):
        name = BENCH_ALIASES.get(argv[0]) or next(iter(argv[1:2]), "")
        prog = "livetrans bench" + (f" {name}" if name in BENCHMARKS else "")
    try:
        with one_line_argparse_errors(), whole_option_names():
            return _main(argv)
    except (UsageError, SettingsError, ModelFileError) as exc:
        message = str(exc)
    except FileNotFoundError as exc:
        message = str(exc) if exc.filename is None else f"no such file or folder: {exc.filename}"
    except _connection_errors() as exc:
        message = f"cannot reach the server: {exc or type(exc).__name__}"
    except KeyboardInterrupt:
        return 130
    print(f"{prog}: {_one_line(message)}", file=sys.stderr)
    return EXIT_USAGE


USER_HELP = """\
livetrans: an OpenAI-compatible streaming translation server for live captions.

It re-translates a speech recogniser's growing transcript on every update, reusing the
previous translation as a draft, so captions come fast and flicker little.

Main commands:
  livetrans serve      start the server: the bundled Gemma 3 270M model on
                       http://127.0.0.1:8000; clients use /v1/chat/completions (any
                       OpenAI SDK) or the WebSocket /v1/live
  livetrans caption    live captions in the terminal from a recorded ASR stream
                       (--file eval/samples/asr_sample_en.jsonl), from any ASR on --stdin,
                       or from speech (--audio); --room NAME publishes them to viewers
  livetrans eval       quality, flicker and speed of live re-translation

The other commands build drafter tables and run benchmarks (livetrans bench --list names
the benchmarks). Every command takes --help.
"""


SERVE_HELP = """\
Start the OpenAI-compatible translation server (default: the bundled Gemma 3 270M model
on http://127.0.0.1:8000). Every option below is also an environment variable
(LIVETRANS_<NAME>). A model file that is missing or no GGUF, a busy port or a bad option
is one line on stderr and exit code 2, before anything is served. The port opens while the
model loads (every request answers 503 'loading' meanwhile): requests are served from the
log line 'ready: serving http://HOST:PORT (...)' on, and GET /health answers 200.
"""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("livetrans")
    except PackageNotFoundError:  # run from a source tree without installing
        return "unknown (not installed)"


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="livetrans", description=USER_HELP,
                                     formatter_class=PlainHelp, allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"livetrans {_version()}",
                        help="print the installed livetrans version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                title="commands")
    serve = sub.add_parser("serve", help="start the OpenAI-compatible server",
                           description=SERVE_HELP, formatter_class=PlainHelp,
                           allow_abbrev=False)
    _add_settings_flags(serve)
    for name, (_, _, help_text) in DELEGATED.items():
        sub.add_parser(name, help=help_text, add_help=False, allow_abbrev=False)
    sub.add_parser("bench", help="run a benchmark: livetrans bench NAME (--list names them)",
                   add_help=False, allow_abbrev=False)
    if argv and argv[0] in BENCH_ALIASES:
        return run_bench_alias(argv[0], argv[1:])
    if argv and argv[0] == "bench":
        return run_bench(argv[1:])
    if argv and argv[0] in DELEGATED:
        # Benchmarks and tools load the model too: same policy knob as the server's.
        configure_omp_wait(tool_omp_policy(argv[1:]))
        module, func, _ = DELEGATED[argv[0]]
        return delegate(module, func)(argv[1:])
    if argv and argv[0] == "serve":
        # serve's own parser reports its mistakes (an unknown option: "see livetrans serve
        # --help"); through the top-level parser they would name "livetrans --help"
        return _serve(serve.parse_args(argv[1:]))
    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
