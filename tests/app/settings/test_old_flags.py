"""Every flag and ``LIVETRANS_*`` variable of ``livetrans serve`` before settings were split by
subsystem (issue 47, item 4) still parses to the same value, as a flag (each spelling) and
as a variable.

``OLD_SETTINGS`` was generated once from the flat ``Settings`` of that version and is kept
as a literal: a flag or variable that goes missing, or reads differently, fails here.
Each row: the flag's spellings, the variable, the value given (None: a switch, given as
the bare flag and as ``true``) and the value read back (paths as strings).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from app import cli
from app.settings import Settings, load_settings

OLD_SETTINGS = [
    (["--model"], "LIVETRANS_MODEL", "m.gguf", "m.gguf"),
    (["--model-alias"], "LIVETRANS_MODEL_ALIAS", "my-model", "my-model"),
    (["--prompt-format"], "LIVETRANS_PROMPT_FORMAT", "chat-gemma", "chat-gemma"),
    (["--n-ctx"], "LIVETRANS_N_CTX", "1024", 1024),
    (["--n-threads"], "LIVETRANS_N_THREADS", "3", 3),
    (["--n-gpu-layers"], "LIVETRANS_N_GPU_LAYERS", "-1", -1),
    (["--n-ubatch"], "LIVETRANS_N_UBATCH", "32", 32),
    (["--omp-wait-policy"], "LIVETRANS_OMP_WAIT_POLICY", "passive", "passive"),
    (["--parallel"], "LIVETRANS_PARALLEL", "7", 7),
    (["--dict-dir"], "LIVETRANS_DICT_DIR", "/tmp/dicts", "/tmp/dicts"),
    (["--verbose-llama"], "LIVETRANS_VERBOSE_LLAMA", None, True),
    (["--host"], "LIVETRANS_HOST", "0.0.0.0", "0.0.0.0"),
    (["--port"], "LIVETRANS_PORT", "9001", 9001),
    (["--max-source-chars"], "LIVETRANS_MAX_SOURCE_CHARS", "123", 123),
    (["--max-body-bytes"], "LIVETRANS_MAX_BODY_BYTES", "2048", 2048),
    (["--max-new-tokens"], "LIVETRANS_MAX_NEW_TOKENS", "77", 77),
    (["--max-context-chars"], "LIVETRANS_MAX_CONTEXT_CHARS", "55", 55),
    (["--live-max-frame-chars"], "LIVETRANS_LIVE_MAX_FRAME_CHARS", "999", 999),
    (["--live-max-connections"], "LIVETRANS_LIVE_MAX_CONNECTIONS", "12", 12),
    (["--live-max-connections-per-key"], "LIVETRANS_LIVE_MAX_CONNECTIONS_PER_KEY", "5", 5),
    (["--live-max-pending-finals"], "LIVETRANS_LIVE_MAX_PENDING_FINALS", "9", 9),
    (["--live-backpressure-s"], "LIVETRANS_LIVE_BACKPRESSURE_S", "2.5", 2.5),
    (["--live-start-timeout-s"], "LIVETRANS_LIVE_START_TIMEOUT_S", "3.5", 3.5),
    (["--live-max-viewers"], "LIVETRANS_LIVE_MAX_VIEWERS", "21", 21),
    (["--live-max-viewers-per-room"], "LIVETRANS_LIVE_MAX_VIEWERS_PER_ROOM", "11", 11),
    (["--live-max-listeners"], "LIVETRANS_LIVE_MAX_LISTENERS", "13", 13),
    (["--live-max-audio-backlog-s"], "LIVETRANS_LIVE_MAX_AUDIO_BACKLOG_S", "4.5", 4.5),
    (["--asr-model"], "LIVETRANS_ASR_MODEL", "/tmp/whisper", "/tmp/whisper"),
    (["--asr-threads"], "LIVETRANS_ASR_THREADS", "2", 2),
    (["--asr-device"], "LIVETRANS_ASR_DEVICE", "cpu", "cpu"),
    (["--asr-window"], "LIVETRANS_ASR_WINDOW", "full", "full"),
    (["--voice", "--voices"], "LIVETRANS_VOICES", "de=voices/de.onnx", ["de=voices/de.onnx"]),
    (["--voice-engine"], "LIVETRANS_VOICE_ENGINE", "espeak-ng", "espeak-ng"),
    (["--voice-threads"], "LIVETRANS_VOICE_THREADS", "3", 3),
    (
        ["--whip-ice-server", "--whip-ice-servers"],
        "LIVETRANS_WHIP_ICE_SERVERS",
        "stun:stun.example.org:3478",
        ["stun:stun.example.org:3478"],
    ),
    (["--whip-udp-ports"], "LIVETRANS_WHIP_UDP_PORTS", "50000-50100", "50000-50100"),
    (["--whip-public-ip"], "LIVETRANS_WHIP_PUBLIC_IP", "203.0.113.7", "203.0.113.7"),
    (["--max-audio-speakers"], "LIVETRANS_MAX_AUDIO_SPEAKERS", "3", 3),
    (["--max-sessions"], "LIVETRANS_MAX_SESSIONS", "17", 17),
    (["--session-ttl-s"], "LIVETRANS_SESSION_TTL_S", "60.5", 60.5),
    (["--queue-size"], "LIVETRANS_QUEUE_SIZE", "19", 19),
    (["--step-tokens"], "LIVETRANS_STEP_TOKENS", "128", 128),
    (["--prefill-chunk"], "LIVETRANS_PREFILL_CHUNK", "64", 64),
    (["--crowded-proposals"], "LIVETRANS_CROWDED_PROPOSALS", "3", 3),
    (["--crowded-draft"], "LIVETRANS_CROWDED_DRAFT", "4", 4),
    (["--final-steps"], "LIVETRANS_FINAL_STEPS", "shared", "shared"),
    (["--max-live-sessions"], "LIVETRANS_MAX_LIVE_SESSIONS", "6", 6),
    (["--max-queue-wait-s"], "LIVETRANS_MAX_QUEUE_WAIT_S", "1.5", 1.5),
    (["--shutdown-grace-s"], "LIVETRANS_SHUTDOWN_GRACE_S", "2.0", 2.0),
    (["--request-timeout-s"], "LIVETRANS_REQUEST_TIMEOUT_S", "33.0", 33.0),
    (["--api-key", "--api-keys"], "LIVETRANS_API_KEYS", "k1,k2", ["k1", "k2"]),
    (["--api-key-file"], "LIVETRANS_API_KEY_FILE", "/tmp/keys.txt", "/tmp/keys.txt"),
    (["--metrics-key"], "LIVETRANS_METRICS_KEY", "mk", "mk"),
    (
        ["--cors-origin", "--cors-origins"],
        "LIVETRANS_CORS_ORIGINS",
        "https://a.example",
        ["https://a.example"],
    ),
    (
        ["--allowed-host", "--allowed-hosts"],
        "LIVETRANS_ALLOWED_HOSTS",
        "captions.example.org",
        ["captions.example.org"],
    ),
    (
        ["--public-url"],
        "LIVETRANS_PUBLIC_URL",
        "https://captions.example.org/live",
        "https://captions.example.org/live",
    ),
    (["--replica-id"], "LIVETRANS_REPLICA_ID", "r1", "r1"),
    (["--room-bus"], "LIVETRANS_ROOM_BUS", "redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
    (["--room-lease-s"], "LIVETRANS_ROOM_LEASE_S", "12.5", 12.5),
    (["--data-dir"], "LIVETRANS_DATA_DIR", "/tmp/lt-data", "/tmp/lt-data"),
    (["--transcript-retention-days"], "LIVETRANS_TRANSCRIPT_RETENTION_DAYS", "7.5", 7.5),
    (["--hls-segment-s"], "LIVETRANS_HLS_SEGMENT_S", "5", 5),
    (["--hls-window-s"], "LIVETRANS_HLS_WINDOW_S", "90", 90),
    (["--hls-offset-s"], "LIVETRANS_HLS_OFFSET_S", "-1.5", -1.5),
    (
        ["--output-allow-host", "--output-allow-hosts"],
        "LIVETRANS_OUTPUT_ALLOW_HOSTS",
        "upload.youtube.com,10.0.0.0/8",
        ["upload.youtube.com", "10.0.0.0/8"],
    ),
    (["--output-timeout-s"], "LIVETRANS_OUTPUT_TIMEOUT_S", "5.5", 5.5),
    (["--output-retry-s"], "LIVETRANS_OUTPUT_RETRY_S", "6.5", 6.5),
    (["--log-level"], "LIVETRANS_LOG_LEVEL", "debug", "debug"),
    (["--log-format"], "LIVETRANS_LOG_FORMAT", "json", "json"),
    (["--langs"], "LIVETRANS_LANGS", "en,de", ["en", "de"]),
    (["--no-trim"], "LIVETRANS_NO_TRIM", None, True),
    (["--corpus"], "LIVETRANS_CORPUS", "de=talk.txt", ["de=talk.txt"]),
]


def _serve_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="livetrans serve")
    cli._add_settings_flags(parser)
    return parser


def _flat(settings: Settings, env: str):  # noqa: ANN202 - any setting's type
    value = getattr(settings, env.removeprefix("LIVETRANS_").lower())
    return str(value) if isinstance(value, Path) else value


@pytest.fixture(autouse=True)
def _no_livetrans_env(monkeypatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("LIVETRANS_"):
            monkeypatch.delenv(name)


@pytest.mark.parametrize("flags, env, raw, expected", OLD_SETTINGS, ids=lambda v: str(v))
def test_every_old_flag_parses_to_the_same_value(flags, env, raw, expected) -> None:
    parser = _serve_parser()
    for flag in flags:
        args = parser.parse_args([flag] if raw is None else [flag, raw])
        assert _flat(cli.serve_settings(args), env) == expected, flag


@pytest.mark.parametrize("flags, env, raw, expected", OLD_SETTINGS, ids=lambda v: str(v))
def test_every_old_variable_parses_to_the_same_value(
    flags, env, raw, expected, monkeypatch
) -> None:
    monkeypatch.setenv(env, "true" if raw is None else raw)
    assert _flat(load_settings(), env) == expected


def test_no_old_flag_is_missing_from_serve() -> None:
    spellings = {s for action in _serve_parser()._actions for s in action.option_strings}
    old = {flag for flags, _, _, _ in OLD_SETTINGS for flag in flags}
    assert old <= spellings, sorted(old - spellings)
