"""Settings: every option is a CLI flag and a ``LIVETRANS_*`` environment variable.

One settings model per subsystem, one module each: the model's (``model.py``:
``ModelSettings``, what ``app.loader`` and every tool that loads a model read) and the
server's (``http``, ``auth``, ``limits``, ``scheduling``, ``live``, ``speech``, ``voice``,
``whip``, ``rooms``, ``hls``, ``outputs``, ``logs``, ``languages``), nested in
``ServerSettings`` (``settings.live.max_listeners``); ``Settings`` is both, what
``livetrans serve`` takes (``server.py``). Flags and variables keep their flat names
(``--live-max-listeners``, ``LIVETRANS_LIVE_MAX_LISTENERS``; ``base.py`` says how), and
flat names still work for building settings and reading them (``server.py``).

List settings (``api_keys``, ``cors_origins``) take comma-separated values from the
environment (``LIVETRANS_API_KEYS=a,b``; a JSON list works too) and repeated flags on the
command line. Every setting with fixed choices is a ``Literal``, so a wrong value is refused
with the choices in the message (``load_settings`` turns that into one line for the CLI).
"""

from app.settings.auth import AuthSettings
from app.settings.base import CommaList, SettingsError, SubsystemSettings, split_list
from app.settings.hls import HlsSettings
from app.settings.http import HttpSettings
from app.settings.languages import LanguageSettings
from app.settings.limits import LimitsSettings
from app.settings.live import LiveSettings
from app.settings.logs import LOG_LEVELS, LogSettings
from app.settings.model import ModelSettings
from app.settings.outputs import OutputSettings
from app.settings.rooms import RoomSettings
from app.settings.scheduling import SchedulingSettings
from app.settings.server import (
    FLAT,
    PLURAL_ONLY,
    FlatField,
    ServerSettings,
    Settings,
    flag_of,
    load_settings,
)
from app.settings.speech import SpeechSettings
from app.settings.voice import VoiceSettings
from app.settings.whip import WhipSettings

__all__ = [
    "FLAT", "LOG_LEVELS", "PLURAL_ONLY", "AuthSettings", "CommaList", "FlatField",
    "HlsSettings", "HttpSettings", "LanguageSettings", "LimitsSettings", "LiveSettings",
    "LogSettings", "ModelSettings", "OutputSettings", "RoomSettings", "SchedulingSettings",
    "ServerSettings", "Settings", "SettingsError", "SpeechSettings", "SubsystemSettings",
    "VoiceSettings", "WhipSettings", "flag_of", "load_settings", "split_list",
]
