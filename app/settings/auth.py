"""Who may use the server: API keys, the metrics key."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field

from app.settings.base import CommaList, SubsystemSettings


class AuthSettings(SubsystemSettings):
    """Who may use the server."""

    group: ClassVar[str] = "auth options"

    api_keys: CommaList = Field(default_factory=list, description="accepted Bearer keys")
    api_key_file: Path | None = Field(None, description="file with one accepted key per line")
    metrics_key: str | None = Field(
        None, description="Bearer key for /metrics (default: any API key, if keys are set)")

    def all_api_keys(self) -> set[str]:
        keys = set(self.api_keys)
        if self.api_key_file is not None:
            for line in self.api_key_file.read_text().splitlines():
                line = line.strip()
                if line and not line.startswith("#"):
                    keys.add(line)
        return keys
