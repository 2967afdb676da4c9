"""Server settings: every option is a CLI flag and a ``LIVETRANS_*`` environment variable."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="LIVETRANS_", extra="ignore")

    model: str | None = Field(None, description="GGUF path; default: bundled Gemma 3 270M")
    model_alias: str | None = Field(None, description="id shown in /v1/models")
    prompt_format: str | None = Field(
        None, description="few-shot | chat-template (default: chosen from the model)"
    )
    host: str = Field("127.0.0.1", description="address to listen on")
    port: int = Field(8000, description="port to listen on")
    n_ctx: int = Field(4096, ge=256, description="context window in tokens")
    n_threads: int | None = Field(None, ge=1, description="CPU threads (default: all cores)")
    n_gpu_layers: int = Field(0, description="layers offloaded to the GPU (-1 = all)")
    omp_wait_policy: Literal["auto", "active", "passive"] = Field(
        "auto", description="how idle CPU threads wait: auto (OpenMP default, fastest on a "
        "dedicated CPU), active, or passive (steadier when other processes share the cores)")
    max_source_chars: int = Field(4000, ge=1, description="longest source text accepted")
    max_new_tokens: int = Field(512, ge=1, description="cap on max_tokens per request")
    max_sessions: int = Field(1000, ge=1, description="sessions kept (least recently used go)")
    session_ttl_s: float = Field(1800.0, gt=0, description="idle seconds before a session expires")
    queue_size: int = Field(64, ge=1, description="engine jobs waiting before 429")
    request_timeout_s: float = Field(120.0, gt=0, description="seconds before a 504 timeout")
    dict_dir: Path | None = Field(
        None, description="folder of drafter tables (<lang>.dict, <lang>.trigram.npz)")
    api_keys: list[str] = Field(default_factory=list, description="accepted Bearer keys")
    api_key_file: Path | None = Field(None, description="file with one accepted key per line")
    cors_origins: list[str] = Field(default_factory=lambda: ["*"],
                                    description="origins allowed from browsers")
    replica_id: str | None = Field(
        None, description="name sent in the X-Livetrans-Replica header (default host:port)"
    )
    log_level: str = Field("info", description="debug, info, warning, error")
    verbose_llama: bool = Field(False, description="show llama.cpp's own log lines")

    def all_api_keys(self) -> set[str]:
        keys = set(self.api_keys)
        if self.api_key_file is not None:
            for line in self.api_key_file.read_text().splitlines():
                line = line.strip()
                if line and not line.startswith("#"):
                    keys.add(line)
        return keys
