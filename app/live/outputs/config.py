"""``start``'s ``outputs``: parsed and checked before any of them becomes state.

Each refusal names the exact field (``outputs[1].url``), as every other ``start`` field's
does, and never repeats a URL whole: an ingestion URL carries the stream's key. Types are
strict, as everywhere on the socket: a URL, language or secret that is not a JSON string is
refused, never converted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import SplitResult, urlsplit

from app.live.outputs.allow import HostPolicy, normal_host

MAX_OUTPUTS = 4  # per talk: each is one more worker and one more request per final
MAX_URL_CHARS = 2048
MAX_SECRET_CHARS = 512
MAX_ECHO_CHARS = 60
OUTPUT_TYPES = ("youtube", "webhook")

OutputType = Literal["youtube", "webhook"]


class OutputError(Exception):
    """One bad output field: becomes one ``error`` frame naming ``param``."""

    def __init__(self, code: str, message: str, param: str) -> None:
        super().__init__(message)
        self.code, self.message, self.param = code, message, param


@dataclass(frozen=True)
class OutputSpec:
    """One checked output of a talk; ``index`` is its place in ``start``'s list."""

    index: int
    type: OutputType
    url: str
    host: str  # normalised, as the host policy saw it
    lang: str
    secret: str | None = field(default=None, repr=False)  # webhooks only; never shown


def _echo(value: str) -> str:
    """A piece of client text fit for a message: printable ASCII only, cut short."""
    shown = "".join(c if " " <= c <= "~" else "?" for c in value[:MAX_ECHO_CHARS])
    return shown + ("..." if len(value) > MAX_ECHO_CHARS else "")


def _url(value: Any, param: str, policy: HostPolicy) -> tuple[str, str]:
    """The URL (without a fragment) and its normalised host, or ``OutputError``."""
    if not isinstance(value, str):
        raise OutputError("invalid_message", f"{param}: a string URL is required", param)
    if not value or len(value) > MAX_URL_CHARS:
        raise OutputError("invalid_message",
                          f"{param}: 1-{MAX_URL_CHARS} characters are required", param)
    if not value.isascii() or any(c <= " " or c == "\x7f" for c in value):
        raise OutputError("invalid_message", f"{param}: the URL must be ASCII without spaces "
                          "or control characters (percent-encode the rest, punycode a "
                          "host name)", param)
    try:
        parts: SplitResult = urlsplit(value)
        port = parts.port
    except ValueError:
        raise OutputError("invalid_message", f"{param}: not a URL", param) from None
    if parts.scheme.lower() not in ("http", "https"):
        raise OutputError("invalid_message", f"{param}: only http:// and https:// URLs "
                          f"(got '{_echo(parts.scheme)}')", param)
    if "@" in parts.netloc:
        raise OutputError("invalid_message", f"{param}: user names and passwords in the "
                          "URL are not accepted", param)
    host = normal_host(parts.hostname or "")
    if not host or port == 0:
        raise OutputError("invalid_message", f"{param}: the URL needs a host", param)
    if not policy.host_allowed(host):
        why = ("this server allows no output hosts" if policy.empty
               else "this server does not allow that host")
        raise OutputError("output_not_allowed", f"{param}: host '{_echo(host)}': {why} "
                          "(the operator allows hosts with serve --output-allow-host)", param)
    return parts._replace(fragment="").geturl(), host


def _lang(value: Any, param: str, targets: list[str]) -> str:
    if value is None:
        if len(targets) == 1:
            return targets[0]
        raise OutputError("invalid_message", f"{param}: required with several target "
                          f"languages (one of {', '.join(targets)})", param)
    if not isinstance(value, str):
        raise OutputError("invalid_message", f"{param}: a language code string is required",
                          param)
    lang = value.strip().lower()
    if lang not in targets:
        raise OutputError("invalid_message", f"{param}: '{_echo(value)}' is not among this "
                          f"talk's target languages ({', '.join(targets)})", param)
    return lang


def _secret(value: Any, param: str) -> str:
    if not isinstance(value, str):
        raise OutputError("invalid_message", f"{param}: a webhook needs a string secret",
                          param)
    if not value or len(value) > MAX_SECRET_CHARS:
        raise OutputError("invalid_message",
                          f"{param}: 1-{MAX_SECRET_CHARS} characters are required", param)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise OutputError("invalid_message", f"{param}: not Unicode text (a lone "
                          "surrogate)", param) from None
    return value


def parse_outputs(raw: list[Any], targets: list[str], policy: HostPolicy) -> list[OutputSpec]:
    """``start``'s ``outputs`` (a JSON list), checked against the talk's target languages
    and the operator's hosts; the first problem is ``OutputError`` naming its field."""
    if len(raw) > MAX_OUTPUTS:
        raise OutputError("invalid_message", f"outputs: at most {MAX_OUTPUTS} outputs "
                          f"(got {len(raw)})", "outputs")
    specs: list[OutputSpec] = []
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(raw):
        where = f"outputs[{i}]"
        if not isinstance(item, dict):
            raise OutputError("invalid_message", f"{where}: an object is required", where)
        kind = item.get("type")
        if not isinstance(kind, str) or kind not in OUTPUT_TYPES:
            raise OutputError("invalid_message", f"{where}.type: one of "
                              f"{', '.join(OUTPUT_TYPES)} is required", f"{where}.type")
        url, host = _url(item.get("url"), f"{where}.url", policy)
        lang = _lang(item.get("lang"), f"{where}.lang", targets)
        secret = _secret(item.get("secret"), f"{where}.secret") if kind == "webhook" else None
        if (url, lang) in seen:
            raise OutputError("invalid_message", f"{where}.url: the same URL and language "
                              "twice", f"{where}.url")
        seen.add((url, lang))
        specs.append(OutputSpec(index=i, type=kind, url=url, host=host, lang=lang,
                                secret=secret))
    return specs
