"""Errors in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``.

The official SDK picks its exception class from the HTTP status (400 BadRequestError,
401 AuthenticationError, 404 NotFoundError, 409 ConflictError, 422 UnprocessableEntityError,
429 RateLimitError, 5xx InternalServerError), so the status must be right, and the body must
never be a traceback.
"""

from __future__ import annotations

import logging
import re

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app import failures
from app.failures import Failure, describe_failure
from app.strict_input import UNSUPPORTED_PARAMETER

log = logging.getLogger("livetrans.api")

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "conflict_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "service_unavailable",
    504: "timeout_error",
}


class APIError(Exception):
    """Raise anywhere in a route; becomes an OpenAI-shaped error response."""

    def __init__(
        self, status: int, message: str, *, param: str | None = None, code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers


def error_body(status: int, message: str, param: str | None = None, code: str | None = None):
    return {
        "error": {
            "message": message,
            "type": _TYPES.get(status, "invalid_request_error"),
            "param": param,
            "code": code,
        }
    }


def error_response(exc: APIError) -> JSONResponse:
    return JSONResponse(
        error_body(exc.status, exc.message, exc.param, exc.code),
        status_code=exc.status,
        headers=exc.headers,
    )


# pydantic names the member of a union that failed in the location ("str",
# "list[ContentPart]"); the client named a field, not a type
# ours (app.api.schemas.encodable), and pydantic-core's own when a length constraint reads
# the string first
_UNICODE_ERRORS = ("invalid_unicode", "string_unicode")
_UNION_TAG = re.compile(r"^(str|int|float|bool|none|[\w-]+\[.*\])$")


def _param_of(loc: tuple) -> str | None:
    parts = [str(p) for p in loc if p not in ("body", "query", "header", "path")
             and not (isinstance(p, str) and _UNION_TAG.match(p))]
    return ".".join(parts) or None


def validation_error(exc: RequestValidationError) -> APIError:
    """Missing or unparsable input is a 400; a present but invalid field is a 422.

    Text that is not valid Unicode (a lone surrogate) is malformed input: a 400, reported
    even when a union's other member failed first.
    """
    errors = exc.errors()
    unicode_errors = [e for e in errors if e.get("type") in _UNICODE_ERRORS]
    first = (unicode_errors or errors or
             [{"loc": (), "msg": "invalid request", "type": ""}])[0]
    param = _param_of(tuple(first.get("loc", ())))
    kind = first.get("type", "")
    # pydantic prefixes a validator's own sentence with "Value error, "; ours stand alone
    msg = str(first.get("msg", "invalid request")).removeprefix("Value error, ")
    if kind == UNSUPPORTED_PARAMETER:  # raised before field validation: the name is in ctx
        param = str((first.get("ctx") or {}).get("param") or "") or None
        return APIError(400, f"{msg}.", param=param, code="unsupported_parameter")
    if kind == "missing":
        return APIError(
            400, f"Missing required parameter: '{param}'.", param=param,
            code="missing_required_parameter",
        )
    if kind in _UNICODE_ERRORS:  # a lone surrogate: malformed text, not a bad value
        if kind == "string_unicode":
            msg = "text contains a lone UTF-16 surrogate, which is not valid Unicode text"
        return APIError(400, f"Invalid text in '{param}': {msg}.", param=param,
                        code="invalid_unicode")
    if kind in ("json_invalid", "model_attributes_type") or param is None:
        return APIError(400, f"Invalid request body: {msg}.", param=param, code="invalid_json")
    return APIError(422, f"Invalid value for '{param}': {msg}.", param=param, code="invalid_value")


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def _api_error(_: Request, exc: APIError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(validation_error(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else "request failed"
        if exc.status_code == 404:
            message = "Unknown route."
        return error_response(APIError(exc.status_code, message))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error on %s %s", request.method, request.url.path,
                  exc_info=exc)
        return error_response(APIError(500, "Internal server error.", code="internal_error"))


class ClientDisconnected(Exception):
    """The client of a non-streaming request went away before its answer."""


def _api_error(failure: Failure) -> APIError:
    return APIError(failure.status, failure.message, param=failure.param, code=failure.code,
                    headers=failure.headers)


def engine_unavailable(reason: str) -> APIError:
    """The engine's scheduler thread cannot continue: a 503 without ``Retry-After``
    (``app.failures.engine_unavailable``)."""
    return _api_error(failures.engine_unavailable(reason))


def map_engine_error(exc: BaseException) -> APIError:
    """Turn failures of the translation path into OpenAI-shaped errors: the one mapping
    (``app.failures.describe_failure``), used by the live socket too, plus what only HTTP
    has (an ``APIError`` raised on the way, a client that hung up)."""
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, ClientDisconnected):
        return APIError(499, "Client closed the request.", code="cancelled")
    return _api_error(describe_failure(exc))
