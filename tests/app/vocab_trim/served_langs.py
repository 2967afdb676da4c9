"""What a server that serves some languages only (``serve --langs``, or a model written by
``trim-vocab``) must do over HTTP, checked the same way for both: it translates into a
served language and refuses another target or source with ``language_not_served``."""

from __future__ import annotations

from typing import Any

import pytest


def assert_serves_only_its_languages(client: Any, message_part: str) -> None:
    """``client`` (an ``openai.OpenAI`` on the server) gets German, and a 400
    ``language_not_served`` naming the parameter for Japanese or a French source; the
    message holds ``message_part``."""
    import openai

    reply = client.chat.completions.create(
        model="livetrans", messages=[{"role": "user", "content": "Thank you all."}],
        extra_body={"target_lang": "de"}, max_tokens=24)
    assert reply.choices[0].message.content.strip()
    for extra, param in (({"target_lang": "ja"}, "target_lang"),
                         ({"target_lang": "de", "source_lang": "fr"}, "source_lang")):
        with pytest.raises(openai.BadRequestError) as err:
            client.chat.completions.create(
                model="livetrans", messages=[{"role": "user", "content": "Hello."}],
                extra_body=extra)
        body = err.value.body
        assert body["code"] == "language_not_served" and body["param"] == param
        assert message_part in body["message"]
