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
import uuid
from pathlib import Path

from openai import OpenAI

from app.usage import PlainHelp


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=PlainHelp)
    ap.add_argument("--base-url", default="http://127.0.0.1:8000/v1",
                    help="the server's OpenAI-compatible API root")
    ap.add_argument("--api-key", default="unused",
                    help="bearer token (any text when the server needs none)")
    ap.add_argument("--file", type=Path, required=True,
                    help="ASR partials JSONL, one utterance a line")
    ap.add_argument("--limit", type=int, default=3, help="first N utterances of --file")
    ap.add_argument("--target-lang", default="de", help="translation language, ISO 639-1")
    args = ap.parse_args(argv)

    session_id = "example-" + uuid.uuid4().hex[:8]
    client = OpenAI(base_url=args.base_url, api_key=args.api_key,
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
