"""The languages the prompts serve, by code, and the check of a requested code: one
list, so a language is served everywhere (chat, live, viewers, settings) or nowhere
(``app.translation.prompts``).
"""

from __future__ import annotations

LANGUAGE_NAMES: dict[str, str] = {
    "en": "English",
    "de": "German",
    "fr": "French",
    "es": "Spanish",
    "it": "Italian",
    "pt": "Portuguese",
    "uk": "Ukrainian",
    "ru": "Russian",
    "zh": "Chinese",
    "ja": "Japanese",
}


class UnsupportedLanguageError(ValueError):
    """Raised for a language code the prompt formats have no examples for."""

    def __init__(self, code: str, param: str) -> None:
        supported = ", ".join(sorted(LANGUAGE_NAMES))
        super().__init__(f"Unsupported language '{code}'. Supported: {supported}.")
        self.code = code
        self.param = param


def direction(source: str, target: str) -> str:
    """``English→de``: a translation direction as tables and plots title it."""
    return f"{LANGUAGE_NAMES.get(source, source)}→{target}"


def check_language(code: str, param: str) -> str:
    """Normalise a language code (``DE`` -> ``de``) or raise ``UnsupportedLanguageError``."""
    normalised = code.strip().lower()
    if normalised not in LANGUAGE_NAMES:
        raise UnsupportedLanguageError(code, param)
    return normalised
