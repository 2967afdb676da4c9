"""What every subsystem's settings share: a flag and a ``LIVETRANS_*`` variable per field,
read by the field's *flat* name, the one it had before settings were split by subsystem.

A subsystem's field has a short name (``LiveSettings.max_listeners``) and a flat name
(``live_max_listeners``): its ``flat_prefix`` and the short name, or what ``flat_names``
says for the few that do not follow the prefix. The flag (``--live-max-listeners``) and
the variable (``LIVETRANS_LIVE_MAX_LISTENERS``) are made of the flat name, so splitting the
settings changed no flag and no variable (``tests/app/settings/test_old_flags.py``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

ENV_PREFIX = "LIVETRANS_"


class SettingsError(ValueError):
    """A setting's value is invalid; the message names the flag and the variable."""


def split_list(value: Any) -> Any:
    """``"a, b"`` or ``'["a", "b"]'`` or ``["a,b"]`` -> ``["a", "b"]``; blanks dropped."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"not a JSON list: {exc.msg}") from None
        else:
            value = [text]
    if isinstance(value, list | tuple):
        items = [p.strip() for v in value for p in str(v).split(",")]
        return [item for item in items if item]
    return value


def lowercase(value: Any) -> Any:
    """A choice's spelling does not matter: `` Espeak-NG `` is ``espeak-ng``."""
    return value.strip().lower() if isinstance(value, str) else value


CommaList = Annotated[list[str], NoDecode, BeforeValidator(split_list)]


def registered_name(value: str, names: Iterable[str]) -> str:
    """``value`` if a registry (recognisers, voices) has it; refused as a ``Literal`` is,
    with the choices, so a plug-in registered by name is a choice like the built-in ones."""
    known = list(names)
    if value in known:
        return value
    quoted = [repr(name) for name in known]
    choices = " or ".join([", ".join(quoted[:-1]), quoted[-1]] if len(quoted) > 1 else quoted)
    raise ValueError(f"Input should be {choices}")


class FlatEnvSource(PydanticBaseSettingsSource):
    """``LIVETRANS_<FLAT NAME>`` for each plain field of a settings class, as pydantic's
    own source reads it (any case; the raw text, which the field's validators parse).
    Fields that are subsystems are left to the subsystem, which reads its own."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # __call__ reads them all

    def __call__(self) -> dict[str, Any]:
        cls = self.settings_cls
        environ = {k.lower(): v for k, v in os.environ.items()}
        values: dict[str, Any] = {}
        for name, field in cls.model_fields.items():
            if is_subsystem(field.annotation):
                continue
            flat = cls.flat_name(name) if issubclass(cls, SubsystemSettings) else name
            raw = environ.get((ENV_PREFIX + flat).lower())
            if raw is not None:
                values[name] = raw
        return values


class SubsystemSettings(BaseSettings):
    """One subsystem's settings: its fields read ``LIVETRANS_<flat name>``.

    ``group`` titles the subsystem's flags in ``livetrans serve --help``."""

    model_config = SettingsConfigDict(extra="ignore")

    group: ClassVar[str] = "options"
    flat_prefix: ClassVar[str] = ""
    flat_names: ClassVar[dict[str, str]] = {}

    @classmethod
    def flat_name(cls, name: str) -> str:
        """``max_listeners`` -> ``live_max_listeners``: the name of its flag and variable."""
        return cls.flat_names.get(name, cls.flat_prefix + name)

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings],
                                   init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, FlatEnvSource(settings_cls)


def is_subsystem(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, SubsystemSettings)
