"""Settings: every option is a CLI flag and a ``LIVETRANS_*`` environment variable.

Two groups, as llama-cpp-python splits them: ``ModelSettings`` say which model loads and
how it runs (what ``app.loader`` reads, and every tool that loads a model: eval, benches,
tests); ``ServerSettings`` say how the service behaves (limits, scheduling, auth, logs).
``Settings`` is both, what ``livetrans serve`` takes.

List settings (``api_keys``, ``cors_origins``) take comma-separated values from the
environment (``LIVETRANS_API_KEYS=a,b``; a JSON list works too) and repeated flags on the
command line. Every setting with fixed choices is a ``Literal``, so a wrong value is refused
with the choices in the message (``load_settings`` turns that into one line for the CLI).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
_ORIGIN = re.compile(r"^https?://[^/\s?#]+$")
# --output-allow-host: a host name, or *. and a domain (addresses and networks: ipaddress)
_OUTPUT_HOST = re.compile(r"^(\*\.)?([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\.)*"
                          r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\.?$")


class SettingsError(ValueError):
    """A setting's value is invalid; the message names the flag and the variable."""


def split_list(value: Any) -> Any:
    """``"a, b"`` or ``'["a", "b"]'`` or ``["a,b"]`` -> ``["a", "b"]``; blanks dropped."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"not a JSON list: {exc.msg}") from None
        else:
            value = [text]
    if isinstance(value, list | tuple):
        items = [p.strip() for v in value for p in str(v).split(",")]
        return [item for item in items if item]
    return value


CommaList = Annotated[list[str], NoDecode, BeforeValidator(split_list)]


class ModelSettings(BaseSettings):
    """Which model loads and how it runs: the same for the server and every tool."""

    model_config = SettingsConfigDict(env_prefix="LIVETRANS_", extra="ignore")

    model: str | None = Field(None, description="GGUF path; default: bundled Gemma 3 270M")
    model_alias: str | None = Field(None, description="id shown in /v1/models")
    prompt_format: Literal["few-shot", "chat-template", "chat-generic", "chat-gemma",
                           "chat-qwen", "chat-llama", "chat-tower", "chat-smollm",
                           "chat-translategemma", "chat-hunyuan-mt", "chat-hy-mt"] | None = Field(
        None, description="few-shot | chat-template (family from the model) | chat-generic, "
                          "chat-gemma, chat-qwen, chat-llama, chat-tower, chat-smollm, "
                          "chat-translategemma, chat-hunyuan-mt, chat-hy-mt "
                          "(default: chosen from the model; docs/models.md)"
    )
    n_ctx: int = Field(4096, ge=256, description="context window in tokens")
    n_threads: int | None = Field(None, ge=1, description="CPU threads (default: all cores)")
    n_gpu_layers: int = Field(0, description="layers offloaded to the GPU (-1 = all)")
    n_ubatch: int | None = Field(
        None, ge=1, description="rows llama.cpp computes at once (default: 48 on the CPU, "
                                "where 64 or more rows of several sequences cost a third "
                                "more each; 512 with GPU layers)")
    omp_wait_policy: Literal["auto", "active", "passive"] = Field(
        "auto", description="how idle CPU threads wait: auto (OpenMP default, fastest on a "
        "dedicated CPU), active, or passive (steadier when other processes share the cores)")
    parallel: int = Field(
        4, ge=1, le=256,
        description="sequences decoded together in each forward pass (llama.cpp's slots); "
                    "1 runs one sequence at a time")
    dict_dir: Path | None = Field(
        None, description="folder of drafter tables (<lang>.dict, <lang>.trigram.npz)")
    verbose_llama: bool = Field(False, description="show llama.cpp's own log lines")

    @field_validator("omp_wait_policy", "prompt_format", mode="before")
    @classmethod
    def _lowercase(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value


class ServerSettings(BaseSettings):
    """How the service behaves: address, limits, scheduling, auth, logs."""

    model_config = SettingsConfigDict(env_prefix="LIVETRANS_", extra="ignore")

    host: str = Field("127.0.0.1", description="address to listen on")
    port: int = Field(8000, ge=0, le=65535, description="port to listen on")
    max_source_chars: int = Field(
        4000, ge=1, description="longest source text (and prediction) accepted")
    max_body_bytes: int = Field(
        1_048_576, ge=1024, description="largest HTTP request body accepted (bytes)")
    max_new_tokens: int = Field(512, ge=1, description="cap on max_tokens per request")
    max_context_chars: int = Field(
        2000, ge=0, description="characters of earlier finals (source and translation) a "
                                "request's context may show the model; older ones are left out")
    live_max_frame_chars: int = Field(
        64_000, ge=1, description="longest WebSocket text frame; longer gets a too_large frame")
    live_max_connections: int = Field(256, ge=1, description="open live sockets per replica")
    live_max_connections_per_key: int = Field(
        64, ge=1, description="open live sockets per API key (when keys are set)")
    live_max_pending_finals: int = Field(
        256, ge=1, description="finals queued per live connection before backpressure")
    live_backpressure_s: float = Field(
        30.0, gt=0, description="seconds a live reader waits for room before too_many_pending "
                         "(at most 5 s before it has read all the client sent: the keepalive)")
    live_start_timeout_s: float = Field(
        10.0, gt=0, description="seconds a new live socket may take to send 'start'; then "
                                "it gets a start_timeout error frame and is closed (1008), "
                                "so an idle socket cannot hold a live-session slot")
    live_max_viewers: int = Field(
        2000, ge=1, description="room viewers (/v1/live/watch) per replica; more get a "
                                "too_many_viewers error frame and close 1013")
    live_max_viewers_per_room: int = Field(
        500, ge=1, description="viewers of one room; more get too_many_viewers and 1013")
    live_max_listeners: int = Field(
        200, ge=1, description="WebRTC listeners of room voices (/v1/rooms/{room}/voice/"
                               "{lang}/whep) per replica; more get 503 too_many_listeners "
                               "(each costs an Opus encoder; HLS listeners are not counted)")
    live_max_audio_backlog_s: float = Field(
        30.0, gt=0, description="seconds of a speaker's audio that may wait for speech "
                                "recognition; beyond it the socket is read no further "
                                "(backpressure), then frames are dropped with audio_overrun")
    asr_model: str | None = Field(
        None, description="CTranslate2 Whisper folder for speech input on /v1/live (model.bin, "
                          "config.json, ...); default: the bundled Whisper base")
    asr_threads: int = Field(
        1, ge=1, description="CPU threads speech recognition may use, every audio speaker "
                             "together (the rest stays with translation)")
    asr_device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="where Whisper runs: cuda when a GPU is there (auto), or cpu")
    asr_window: Literal["fit", "full"] = Field(
        "fit", description="Whisper's encoder window: fitted to the buffer (fit: about a "
                           "quarter of the compute for short buffers) or faster-whisper's "
                           "30 s (full)")
    voices: CommaList = Field(
        default_factory=list, description="LANG=PATH.onnx: a Piper voice (its .onnx.json "
        "beside it) that speaks LANG's committed text to connections asking for it (start's "
        "voices); languages without one get the default engine's voice (--voice-engine)")
    voice_engine: Literal["auto", "piper", "kokoro", "espeak-ng", "none"] = Field(
        "auto", description="the voice of languages no --voice names: auto (the packaged "
        "voices installed: Kokoro for ja, Piper's joe for en), piper, kokoro, espeak-ng or "
        "none; espeak-ng speaks every language the others do not (except with none)")
    voice_threads: int = Field(
        1, ge=1, le=64, description="CPU threads speech synthesis may use, every voice "
                                    "together (the rest stays with translation)")
    whip_ice_servers: CommaList = Field(
        default_factory=list, description="STUN/TURN server URLs for WHIP ingest (e.g. "
        "stun:stun.example.org:3478); none by default: ICE offers the host's addresses")
    whip_udp_ports: str | None = Field(
        None, description="UDP ports WHIP sessions' WebRTC media may use, LOW-HIGH (e.g. "
        "50000-50100): the range a container's host publishes; default: any port")
    whip_public_ip: str | None = Field(
        None, description="the address WHIP publishers reach this server's UDP ports by "
        "(the host's public address, when the server runs in a container or behind NAT): "
        "the SDP answer's host candidates carry it; default: the server's own addresses")
    max_audio_speakers: int = Field(
        1, ge=1, description="audio speakers recognised at once (one recogniser thread for "
                             "all); one more gets a busy error frame at start")
    max_sessions: int = Field(1000, ge=1, description="sessions kept (least recently used go)")
    session_ttl_s: float = Field(1800.0, gt=0, description="idle seconds before a session expires")
    queue_size: int = Field(64, ge=1, description="engine jobs waiting before 429")
    step_tokens: int = Field(
        512, ge=16, description="batch rows per forward pass (prompt chunks fill the rest)")
    prefill_chunk: int = Field(
        256, ge=8, description="prompt tokens of one sequence per forward pass, so a long "
                               "prompt cannot hold up finals")
    crowded_proposals: int | None = Field(
        2, ge=0, description="drafter proposals per sequence when several sequences decode "
                             "in one forward pass (a crowded pass costs a full row for each "
                             "rejected one; 2 measured 1.07-1.13x as fast as 6 at 2, 4 and "
                             "8 speakers on 2 cores)")
    crowded_draft: int | None = Field(
        8, ge=0, description="SSBD draft tokens a partial or request verifies per forward pass "
                             "when the pass carries several sequences, the rest part by part "
                             "(a final verifies its whole draft; rows past a draft's first "
                             "mismatch are thrown away; at 8 speakers on 2 cores 8 measured "
                             "1.16x as fast as the whole draft on the full model, 1.02-1.12x "
                             "on a trimmed one)")
    final_steps: Literal["lead", "alone", "shared"] = Field(
        "lead", description="what forward passes carry besides a running final: 'lead' "
                            "other sequences' next token only, 'alone' nothing, 'shared' "
                            "everything")
    max_live_sessions: int = Field(
        8, ge=1, description="live sessions admitted at once; more get a busy error at once "
                             "(measure yours with `livetrans bench-concurrency`)")
    max_queue_wait_s: float = Field(
        5.0, gt=0, description="refuse new requests and live sessions while queued work "
                               "has waited longer than this (seconds)")
    shutdown_grace_s: float = Field(
        30.0, ge=0, description="on shutdown, seconds accepted work (finals first) may "
                                "still take")
    request_timeout_s: float = Field(120.0, gt=0, description="seconds before a 504 timeout")
    api_keys: CommaList = Field(default_factory=list, description="accepted Bearer keys")
    api_key_file: Path | None = Field(None, description="file with one accepted key per line")
    metrics_key: str | None = Field(
        None, description="Bearer key for /metrics (default: any API key, if keys are set)")
    cors_origins: CommaList = Field(
        default_factory=list,
        description="browser origins allowed cross-origin, e.g. https://app.example "
        "(default none; * = any)")
    allowed_hosts: CommaList = Field(
        default_factory=list,
        description="host names clients may reach the server by (the Host header), e.g. "
        "captions.example.org or *.example.org; * = any. Default: when serving on a loopback "
        "address, localhost and loopback addresses only (a DNS-rebinding page cannot reach "
        "it); otherwise any")
    public_url: str | None = Field(
        None, description="the server's address as the audience reaches it, e.g. "
        "https://captions.example.org (a path prefix too): audience links and QR codes "
        "start with it; default: the address each request came to (scheme and Host header)")
    replica_id: str | None = Field(
        None, description="name sent in the X-Livetrans-Replica header (default host:port)"
    )
    room_bus: str | None = Field(
        None, description="where rooms live: redis://host:port/db (or redis-sentinel://"
                          "host:port[,host:port...]/SERVICE[/db] for a primary that Redis "
                          "Sentinel fails over) shares rooms, viewers' frames, finals, room "
                          "ownership and transcripts among replicas; default: this process "
                          "only (one replica)")
    room_lease_s: float = Field(
        10.0, ge=1, le=300, description="seconds a replica holds a room without renewing "
                                        "(a replica that dies frees its rooms after this)")
    data_dir: Path = Field(
        None, validate_default=True,
        description="folder for durable data without a room bus (transcripts.sqlite3); "
                    "default: livetrans in $XDG_DATA_HOME, else in .local/share of your "
                    "home folder")
    transcript_retention_days: float = Field(
        30.0, ge=0, le=36500, allow_inf_nan=False,
        description="days a talk's transcript is kept after the talk started (0: until the "
                    "room's newer talks push it out, 200 per room)")
    hls_segment_s: int = Field(
        4, ge=1, le=60, description="seconds of captions per segment of the HLS subtitle "
                                    "renditions (their EXT-X-TARGETDURATION)")
    hls_window_s: int = Field(
        60, ge=1, le=3600, description="seconds of segments a running talk's HLS subtitle "
                                       "playlist lists (at least three segments); an ended "
                                       "talk's lists all of them")
    hls_offset_s: float = Field(
        0.0, ge=-86400, le=86400, allow_inf_nan=False,
        description="the video's presentation time, in seconds, at the talk's start: where "
                    "the HLS subtitle cues (timed from the talk's start) line up with the "
                    "organiser's stream (X-TIMESTAMP-MAP); offset= on a playlist overrides it")
    output_allow_hosts: CommaList = Field(
        default_factory=list,
        description="hosts a speaker's pushes (start's outputs: YouTube captions, signed "
        "webhooks) may reach: a host name (upload.youtube.com), *.example.org (the names "
        "under it), * (any name), an address or a network (10.0.0.5, 10.0.0.0/8). Default: "
        "none. A private or loopback address is refused unless an address, network or "
        "exact host name names it (wildcards never do)")
    output_timeout_s: float = Field(
        10.0, gt=0, le=300, allow_inf_nan=False,
        description="seconds one push request may take, from connecting to its answer")
    output_retry_s: float = Field(
        30.0, ge=0, le=3600, allow_inf_nan=False,
        description="seconds after its caption a push is still retried (with backoff) "
                    "before it counts as failed")
    log_level: Literal[LOG_LEVELS] = Field(
        "info", description="critical, error, warning, info or debug")
    log_format: Literal["text", "json"] = Field(
        "text", description="log lines as text or one JSON object per line (with request_id)")
    langs: CommaList = Field(
        default_factory=list, description="the event's languages, e.g. en,de: only these "
        "are served (others are refused: language_not_served), and a model whose vocabulary "
        "can be trimmed is served as a copy trimmed to them, built on first start (about "
        "half a minute) and cached, which is faster on a CPU. Default: "
        "every language, the full model")
    no_trim: bool = Field(False, description="with --langs: serve the full model, untrimmed")
    corpus: CommaList = Field(
        default_factory=list, description="LANG=FILE: the organiser's text in one of --langs "
        "(a segment per line: slides, abstracts, earlier talks), counted for the trimmed "
        "copy besides the built-in word lists")

    @field_validator("log_level", "log_format", "final_steps", "asr_device", "asr_window",
                     "voice_engine", mode="before")
    @classmethod
    def _lowercase_choice(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("langs")
    @classmethod
    def _langs(cls, value: list[str]) -> list[str]:
        from app.translation.prompts import UnsupportedLanguageError, check_language

        langs: list[str] = []
        for code in value:
            try:
                lang = check_language(code, "langs")
            except UnsupportedLanguageError as exc:
                raise ValueError(str(exc)) from None
            if lang in langs:
                raise ValueError(f"'{lang}' is named twice; name each language once")
            langs.append(lang)
        if len(langs) == 1:
            raise ValueError(f"only '{langs[0]}' is named; name the speakers' language and "
                             "the captions' (e.g. en,de)")
        return langs

    @field_validator("corpus")
    @classmethod
    def _corpus(cls, value: list[str]) -> list[str]:
        from app.translation.prompts import UnsupportedLanguageError, check_language

        entries = []
        for entry in value:
            lang, sep, path = entry.partition("=")
            if not sep or not path.strip():
                raise ValueError(f"'{entry}' is not LANG=FILE (e.g. de=talks/de.txt)")
            try:
                entries.append(f"{check_language(lang, 'corpus')}={path.strip()}")
            except UnsupportedLanguageError as exc:
                raise ValueError(str(exc)) from None
        return entries

    @field_validator("voices")
    @classmethod
    def _voices(cls, value: list[str]) -> list[str]:
        from app.translation.prompts import UnsupportedLanguageError, check_language

        entries, langs = [], set()
        for entry in value:
            lang, sep, path = entry.partition("=")
            if not sep or not path.strip().endswith(".onnx"):
                raise ValueError(f"'{entry}' is not LANG=PATH.onnx (e.g. "
                                 "de=voices/de_DE-thorsten-medium.onnx)")
            try:
                lang = check_language(lang, "voices")
            except UnsupportedLanguageError as exc:
                raise ValueError(str(exc)) from None
            if lang in langs:
                raise ValueError(f"'{lang}' has two voices; name one voice per language")
            langs.add(lang)
            entries.append(f"{lang}={path.strip()}")
        return entries

    def corpus_files(self) -> list[tuple[str, Path]]:
        """``--corpus`` as (language, file) pairs."""
        return [(lang, Path(path).expanduser())
                for lang, _, path in (e.partition("=") for e in self.corpus)]

    @field_validator("room_bus")
    @classmethod
    def _bus_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip()
        if re.match(r"^redis-sentinel://[^\s]+$", value):
            from app.rooms.redis_client import parse_sentinel

            parse_sentinel(value)  # BadRedisURL is a ValueError: one line
            return value
        if not re.match(r"^(rediss?|unix)://[^\s]+$", value):
            raise ValueError("use redis://host:port/db (rediss:// for TLS), or "
                             "redis-sentinel://host:port[,host:port...]/SERVICE[/db]")
        return value

    @field_validator("whip_udp_ports")
    @classmethod
    def _whip_udp_ports(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        from app.port_range import PortRange

        return str(PortRange.parse(value))  # a ValueError is one line

    @field_validator("whip_public_ip")
    @classmethod
    def _whip_public_ip(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        try:
            address = ipaddress.ip_address(value.strip().strip("[]"))
        except ValueError:
            raise ValueError(f"'{value.strip()}' is not an IP address (e.g. 203.0.113.7)") \
                from None
        if address.is_unspecified or address.is_multicast:
            raise ValueError(f"'{address}' cannot receive a publisher's media; name the "
                             "host's public address")
        return str(address)

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        from app.rooms.audience.links import check_base_url

        return check_base_url(value)  # BadBaseURL is a ValueError: one line

    @field_validator("output_allow_hosts")
    @classmethod
    def _output_hosts(cls, value: list[str]) -> list[str]:
        hosts = []
        for entry in value:
            host = entry.strip().lower()
            hosts.append(host.rstrip(".") if host != "." else host)
            if host == "*" or _OUTPUT_HOST.match(host):
                continue
            try:
                ipaddress.ip_network(host.strip("[]"), strict=False)
            except ValueError:
                raise ValueError(f"'{host}' is not a host: use a host name, *.domain, *, "
                                 "an address or a network (10.0.0.0/8)") from None
        return hosts

    @field_validator("data_dir", mode="before")
    @classmethod
    def _data_dir(cls, value: Any) -> Path:
        if value is None or (isinstance(value, str) and not value.strip()):
            xdg = os.environ.get("XDG_DATA_HOME", "").strip()
            base = Path(xdg) if xdg else Path.home() / ".local" / "share"
            return base / "livetrans"
        return Path(value).expanduser()

    @field_validator("cors_origins")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        origins = [v.rstrip("/") if v != "*" else v for v in value]
        for origin in origins:
            if origin != "*" and not _ORIGIN.match(origin):
                raise ValueError(
                    f"'{origin}' is not an origin: use scheme://host[:port] (no path) or *")
        return origins

    def all_api_keys(self) -> set[str]:
        keys = set(self.api_keys)
        if self.api_key_file is not None:
            for line in self.api_key_file.read_text().splitlines():
                line = line.strip()
                if line and not line.startswith("#"):
                    keys.add(line)
        return keys


class Settings(ServerSettings, ModelSettings):
    """Everything ``livetrans serve`` takes: the server's settings and its model's."""

    model_config = SettingsConfigDict(env_prefix="LIVETRANS_", extra="ignore")

    def check_files(self) -> None:
        """Files the settings name must exist (``SettingsError``, one sentence)."""
        for name, path, want_dir in (("api_key_file", self.api_key_file, False),
                                     ("dict_dir", self.dict_dir, True)):
            if path is None:
                continue
            ok = path.is_dir() if want_dir else path.is_file()
            if not ok:
                kind = "folder" if want_dir else "file"
                raise SettingsError(f"{flag_of(name)}: no such {kind}: {path}")
        for lang, path in self.corpus_files():
            if lang not in self.langs:
                raise SettingsError(f"{flag_of('corpus')} {lang}={path}: {lang} is not in "
                                    f"--langs ({','.join(self.langs) or 'none given'})")
            if not path.is_file():
                raise SettingsError(f"{flag_of('corpus')}: no such file: {path}")
        for entry in self.voices:
            lang, _, path = entry.partition("=")
            model = Path(path).expanduser()
            for needed in (model, Path(f"{model}.json")):
                if not needed.is_file():
                    raise SettingsError(f"{flag_of('voices')} {lang}={path}: no such file: "
                                        f"{needed}")
        if self.asr_model is not None:
            from app.speech.model_files import SpeechModelError, resolve_asr_model

            try:
                resolve_asr_model(self.asr_model)
            except SpeechModelError as exc:
                raise SettingsError(f"{flag_of('asr_model')}: {exc}") from None


# List settings named as a whole, never one item at a time: ``--langs`` is the event's
# language set, and ``--lang`` means one language elsewhere (``build-dict --lang de``), so
# ``app.cli`` gives them no singular spelling and ``serve --lang en,de`` is refused.
PLURAL_ONLY = frozenset({"langs"})


def flag_of(name: str) -> str:
    """``api_key_file`` -> ``--api-key-file (LIVETRANS_API_KEY_FILE)``; a list setting's
    flag is singular and repeatable (``--api-key``), as ``app.cli`` makes it, except the
    ``PLURAL_ONLY`` ones."""
    flag = "--" + name.replace("_", "-")
    field = Settings.model_fields.get(name)
    if field is not None and "list" in str(field.annotation) and flag.endswith("s") \
            and not flag.endswith("us") and name not in PLURAL_ONLY:  # --corpus: singular
        flag = flag[:-1]
    return f"{flag} (LIVETRANS_{name.upper()})"


def load_settings(**overrides: Any) -> Settings:
    """``Settings`` from the environment and ``overrides``; a bad value is ``SettingsError``.

    The message is one line naming the flag, its variable, what is wrong, and the choices
    where there are fixed ones (pydantic's own message lists them).
    """
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        err = exc.errors()[0]
        name = str(err["loc"][0]) if err.get("loc") else ""
        where = flag_of(name) if name in Settings.model_fields else name or "settings"
        got = err.get("input")
        shown = f" (got {got!r})" if isinstance(got, str | int | float) else ""
        msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
        raise SettingsError(f"invalid {where}{shown}: {msg}") from None
