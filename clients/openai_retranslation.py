"""Live re-translation over plain HTTP with the official ``openai`` SDK (no WebSocket).

    python -m clients.openai_retranslation --file ASR.jsonl --limit 3 --target-lang de

Each utterance of an ASR partials file is one segment: every partial is sent to
``/v1/chat/completions`` in the same session (so the previous translation is the draft),
and the final with ``is_final: true``. The session is named in the ``X-Session-ID`` header,
which a gateway in front of several replicas routes on (README, "Scale-out"). It prints
the displayed caption of each update, the way a caption overlay would show it.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path

import openai
from openai import OpenAI

from app.usage import (
    EXIT_USAGE,
    PlainHelp,
    UsageError,
    checked,
    one_line_argparse_errors,
    positive_int,
)
from clients.asr_file import load_utterances
from clients.urls import default_server, http_url

PROG = "python -m clients.openai_retranslation"


def main(argv: list[str] | None = None) -> int:
    """Run the example; a mistake (no server, a wrong key, a bad file) is one line on
    stderr and exit code 2."""
    try:
        with one_line_argparse_errors():
            return _run(argv)
    except UsageError as exc:
        message = str(exc)
    except openai.APIConnectionError as exc:
        message = f"cannot reach the server at {exc.request.url}: is `livetrans serve` running?"
    except openai.APIStatusError as exc:
        message = f"the server answered {exc.status_code}: {_error_text(exc)}"
        if exc.status_code == 401:
            message += " (pass the server's key with --api-key)"
    except openai.APIResponseValidationError as exc:
        message = f"the server's answer is not a chat completion: {exc.message}"
    except KeyboardInterrupt:
        return 130
    print(f"{PROG}: {' '.join(message.split())}", file=sys.stderr)
    return EXIT_USAGE


def _error_text(exc: openai.APIStatusError) -> str:
    """The server's own message (OpenAI's error shape), else the status line; a server
    that is no livetrans (no such route, a plain web server) gets a hint."""
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error", body)
    message = error.get("message") if isinstance(error, dict) else None
    text = str(message) if message else exc.response.reason_phrase or "no error message"
    if exc.status_code in (404, 405, 501) and not message:
        text += " (is --server a livetrans server?)"
    return text


def _run(argv: list[str] | None) -> int:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=PlainHelp)
    ap.add_argument("--server", default=default_server(),
                    help="the server's address (default: $LIVETRANS_SERVER, else "
                         "%(default)s)")
    ap.add_argument("--base-url", default=None,
                    help="the OpenAI-compatible API root, if not the server's /v1")
    ap.add_argument("--api-key", default="unused",
                    help="bearer token (any text when the server needs none)")
    ap.add_argument("--file", type=Path, required=True,
                    help="ASR partials JSONL, one utterance a line")
    ap.add_argument("--limit", type=checked(positive_int, "a whole number >= 1"), default=3,
                    help="first N utterances of --file")
    ap.add_argument("--target-lang", default="de", help="translation language, ISO 639-1")
    args = ap.parse_args(argv)

    utterances = load_utterances(args.file, args.limit)  # checked before anything is sent
    session_id = "example-" + uuid.uuid4().hex[:8]
    base_url = http_url(args.base_url) if args.base_url else http_url(args.server) + "/v1"
    client = OpenAI(base_url=base_url, api_key=args.api_key, max_retries=0, timeout=120,
                    default_headers={"X-Session-ID": session_id})
    seq = 0  # the session's update counter: an ASR retraction is a newer update, not stale
    for utterance in utterances:
        for event in utterance["events"]:
            seq += 1
            final = event["type"] == "final"
            response = client.chat.completions.create(
                model="default",
                messages=[{"role": "user", "content": event["text"]}],
                extra_body={"target_lang": args.target_lang, "is_final": final, "seq": seq},
            )
            info = (response.model_extra or {}).get("livetrans")
            if not isinstance(info, dict):
                raise UsageError(f"{base_url} answered without the 'livetrans' object: it is "
                                 "not a livetrans server (--server, --base-url)")
            marker = "FINAL" if final else f"r{info['revision']:<4}"
            print(f"{marker} {info['display_text']}   "
                  f"(accepted {info['accepted_tokens']}/{info['draft_tokens']} draft tokens, "
                  f"{info['decode_ms']:.0f} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
