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
import json
import sys
import uuid
from pathlib import Path

import openai
from openai import OpenAI

from app.usage import EXIT_USAGE, PlainHelp, UsageError, one_line_argparse_errors
from clients.urls import default_server

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
    except FileNotFoundError as exc:
        message = f"no such file: {exc.filename}"
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        message = f"cannot read the ASR file: {exc}"
    except KeyboardInterrupt:
        return 130
    print(f"{PROG}: {' '.join(message.split())}", file=sys.stderr)
    return EXIT_USAGE


def _error_text(exc: openai.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error", body) if isinstance(body, dict) else {}
    return str(error.get("message") if isinstance(error, dict) else "") or exc.message


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
    ap.add_argument("--limit", type=int, default=3, help="first N utterances of --file")
    ap.add_argument("--target-lang", default="de", help="translation language, ISO 639-1")
    args = ap.parse_args(argv)

    session_id = "example-" + uuid.uuid4().hex[:8]
    base_url = args.base_url or args.server.rstrip("/") + "/v1"
    if "://" not in base_url:
        base_url = "http://" + base_url
    client = OpenAI(base_url=base_url, api_key=args.api_key, max_retries=0, timeout=120,
                    default_headers={"X-Session-ID": session_id})
    lines = args.file.read_text(encoding="utf-8").splitlines()[: args.limit]
    seq = 0  # the session's update counter: an ASR retraction is a newer update, not stale
    for line in lines:
        utterance = json.loads(line)
        for event in utterance["events"]:
            seq += 1
            final = event["type"] == "final"
            response = client.chat.completions.create(
                model="default",
                messages=[{"role": "user", "content": event["text"]}],
                extra_body={"target_lang": args.target_lang, "is_final": final, "seq": seq},
            )
            info = response.model_extra["livetrans"]
            marker = "FINAL" if final else f"r{info['revision']:<4}"
            print(f"{marker} {info['display_text']}   "
                  f"(accepted {info['accepted_tokens']}/{info['draft_tokens']} draft tokens, "
                  f"{info['decode_ms']:.0f} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
