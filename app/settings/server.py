"""The server's settings, one subsystem each, and ``Settings``: them and the model's.

``ServerSettings`` nests one settings model per subsystem (``settings.live.max_listeners``,
``settings.rooms.bus``); ``Settings`` is it and ``ModelSettings`` (whose fields stay at the
top: ``settings.n_ctx``), what ``livetrans serve`` takes. Flags and variables keep the flat
names they had before the split (``--live-max-listeners``,
``LIVETRANS_LIVE_MAX_LISTENERS``): ``FLAT`` maps each flat name to where it lives now.

Compatibility with flat names, kept for callers outside ``app/`` (tests, tools, scripts):
``Settings(live_max_listeners=3)`` and ``load_settings(room_bus=...)`` take flat names
(and nested ones: ``Settings(live={"max_listeners": 3})``), and reading a flat name
(``settings.room_bus``) gives the nested value. Reading is all it does: a flat name cannot
be set (``settings.rooms.bus = ...`` can). Code in ``app/`` reads the nested names.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError
from pydantic.fields import FieldInfo

from app.settings.auth import AuthSettings
from app.settings.base import SettingsError, SubsystemSettings, is_subsystem
from app.settings.hls import HlsSettings
from app.settings.http import HttpSettings
from app.settings.languages import LanguageSettings
from app.settings.limits import LimitsSettings
from app.settings.live import LiveSettings
from app.settings.logs import LogSettings
from app.settings.model import ModelSettings
from app.settings.outputs import OutputSettings
from app.settings.rooms import RoomSettings
from app.settings.scheduling import SchedulingSettings
from app.settings.speech import SpeechSettings
from app.settings.voice import VoiceSettings
from app.settings.whip import WhipSettings


class ServerSettings(SubsystemSettings):
    """How the service behaves, one subsystem per field."""

    http: HttpSettings = Field(default_factory=HttpSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    scheduling: SchedulingSettings = Field(default_factory=SchedulingSettings)
    live: LiveSettings = Field(default_factory=LiveSettings)
    speech: SpeechSettings = Field(default_factory=SpeechSettings)
    voice: VoiceSettings = Field(default_factory=VoiceSettings)
    whip: WhipSettings = Field(default_factory=WhipSettings)
    rooms: RoomSettings = Field(default_factory=RoomSettings)
    hls: HlsSettings = Field(default_factory=HlsSettings)
    outputs: OutputSettings = Field(default_factory=OutputSettings)
    logs: LogSettings = Field(default_factory=LogSettings)
    languages: LanguageSettings = Field(default_factory=LanguageSettings)

    def __init__(self, **values: Any) -> None:
        super().__init__(**_nested(values))

    def __getattr__(self, name: str) -> Any:
        where = FLAT.get(name)
        if where is not None and where.subsystem:  # a flat name, read only (module doc)
            return getattr(getattr(self, where.subsystem), where.name)
        return super().__getattr__(name)


class Settings(ServerSettings, ModelSettings):
    """Everything ``livetrans serve`` takes: the server's settings and its model's."""

    def check_files(self) -> None:
        """Files the settings name must exist (``SettingsError``, one sentence)."""
        for name, path, want_dir in (("api_key_file", self.auth.api_key_file, False),
                                     ("dict_dir", self.dict_dir, True)):
            if path is None:
                continue
            ok = path.is_dir() if want_dir else path.is_file()
            if not ok:
                kind = "folder" if want_dir else "file"
                raise SettingsError(f"{flag_of(name)}: no such {kind}: {path}")
        langs = self.languages.langs
        for lang, path in self.languages.corpus_files():
            if lang not in langs:
                raise SettingsError(f"{flag_of('corpus')} {lang}={path}: {lang} is not in "
                                    f"--langs ({','.join(langs) or 'none given'})")
            if not path.is_file():
                raise SettingsError(f"{flag_of('corpus')}: no such file: {path}")
        for entry in self.voice.voices:
            lang, _, path = entry.partition("=")
            model = Path(path).expanduser()
            for needed in (model, Path(f"{model}.json")):
                if not needed.is_file():
                    raise SettingsError(f"{flag_of('voices')} {lang}={path}: no such file: "
                                        f"{needed}")
        if self.speech.model is not None:
            from app.speech.model_files import SpeechModelError, resolve_asr_model

            try:
                resolve_asr_model(self.speech.model)
            except SpeechModelError as exc:
                raise SettingsError(f"{flag_of('asr_model')}: {exc}") from None


@dataclass(frozen=True)
class FlatField:
    """Where a flat name lives: ``subsystem`` (a field of ``ServerSettings``; "" for the
    model's, at the top) and ``name`` in it."""

    subsystem: str
    name: str
    field: FieldInfo
    group: str


def _flat_fields() -> dict[str, FlatField]:
    flat = {name: FlatField("", name, field, ModelSettings.group)
            for name, field in ModelSettings.model_fields.items()}
    for subsystem, holder in ServerSettings.model_fields.items():
        cls = holder.annotation
        assert is_subsystem(cls), subsystem
        for name, field in cls.model_fields.items():
            key = cls.flat_name(name)
            assert key not in flat, f"two settings are called {key}"
            flat[key] = FlatField(subsystem, name, field, cls.group)
    return flat


# every setting by its flat name (its flag's and its variable's), model's first, then the
# server's subsystems in ``ServerSettings``' order
FLAT: dict[str, FlatField] = _flat_fields()


def _nested(values: dict[str, Any]) -> dict[str, Any]:
    """Flat names moved into their subsystems; nested and model values as they are."""
    nested: dict[str, Any] = {}
    for key, value in values.items():
        where = FLAT.get(key)
        if where is None or not where.subsystem:
            nested[key] = value
            continue
        sub = nested.get(where.subsystem)
        if sub is None:
            sub = values.get(where.subsystem, {})
        if isinstance(sub, BaseModel):
            sub = {k: getattr(sub, k) for k in type(sub).model_fields}
        nested[where.subsystem] = {**sub, where.name: value}
    for subsystem in ServerSettings.model_fields:
        # validated as a field, never by its default factory, so an error in a value read
        # from the environment is located in its subsystem (``load_settings`` names it)
        nested.setdefault(subsystem, {})
    return nested


# List settings named as a whole, never one item at a time: ``--langs`` is the event's
# language set, and ``--lang`` means one language elsewhere (``build-dict --lang de``), so
# ``app.cli`` gives them no singular spelling and ``serve --lang en,de`` is refused.
PLURAL_ONLY = frozenset({"langs"})


def flag_of(name: str) -> str:
    """``api_key_file`` -> ``--api-key-file (LIVETRANS_API_KEY_FILE)``; a list setting's
    flag is singular and repeatable (``--api-key``), as ``app.cli`` makes it, except the
    ``PLURAL_ONLY`` ones. ``name`` is a flat name."""
    flag = "--" + name.replace("_", "-")
    where = FLAT.get(name)
    if where is not None and "list" in str(where.field.annotation) and flag.endswith("s") \
            and not flag.endswith("us") and name not in PLURAL_ONLY:  # --corpus: singular
        flag = flag[:-1]
    return f"{flag} (LIVETRANS_{name.upper()})"


def flat_name_at(loc: tuple[Any, ...]) -> str:
    """The flat name of a validation error's location (``("live", "max_listeners")``)."""
    if len(loc) >= 2 and loc[0] in ServerSettings.model_fields:
        cls = ServerSettings.model_fields[str(loc[0])].annotation
        return cls.flat_name(str(loc[1]))
    return str(loc[0]) if loc else ""


def load_settings(**overrides: Any) -> Settings:
    """``Settings`` from the environment and ``overrides`` (flat names, as flags give
    them); a bad value is ``SettingsError``.

    The message is one line naming the flag, its variable, what is wrong, and the choices
    where there are fixed ones (pydantic's own message lists them).
    """
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        err = exc.errors()[0]
        name = flat_name_at(tuple(err.get("loc") or ()))
        where = flag_of(name) if name in FLAT else name or "settings"
        got = err.get("input")
        shown = f" (got {got!r})" if isinstance(got, str | int | float) else ""
        msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
        raise SettingsError(f"invalid {where}{shown}: {msg}") from None
