"""The one typing rule for everything a client sends, over HTTP and over the WebSocket.

Strict: a field takes a value of its own JSON type only. ``"13"`` is no number, ``"yes"``
and ``1`` are no booleans, ``1.0`` is no integer (an integer is a number, as JSON has it).
A lenient parser would read ``is_final: "false"`` as true. Fields a model does not know
are ignored, as OpenAI does for forward compatibility; the OpenAI parameters livetrans
does not implement are refused by name instead (``app.api.schemas``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

STRICT_INPUT = ConfigDict(strict=True, extra="ignore")
# pydantic error type of an OpenAI parameter livetrans does not implement (a 400 naming it)
UNSUPPORTED_PARAMETER = "unsupported_parameter"


class ClientInput(BaseModel):
    """Base of every request body and WebSocket message model."""

    model_config = STRICT_INPUT
