"""The model's settings: which model loads and how it runs, the same for the server and
every tool that loads one (eval, benchmarks, tests: ``app.loader`` reads them).

Its fields keep their flat names (``--n-ctx``, ``LIVETRANS_N_CTX``) and, in ``Settings``,
their place at the top (``settings.n_ctx``): ``Settings`` is a ``ModelSettings``, which is
what the loader takes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from app.settings.base import SubsystemSettings, lowercase


class ModelSettings(SubsystemSettings):
    """Which model loads and how it runs: the same for the server and every tool."""

    group: ClassVar[str] = "model options"

    model: str | None = Field(None, description="GGUF path; default: bundled Gemma 3 270M")
    model_alias: str | None = Field(None, description="id shown in /v1/models")
    prompt_format: Literal["few-shot", "chat-template", "chat-generic", "chat-gemma",
                           "chat-qwen", "chat-llama", "chat-tower", "chat-smollm",
                           "chat-translategemma", "chat-hunyuan-mt", "chat-hy-mt"] | None = Field(
        None, description="few-shot | chat-template (family from the model) | chat-generic, "
                          "chat-gemma, chat-qwen, chat-llama, chat-tower, chat-smollm, "
                          "chat-translategemma, chat-hunyuan-mt, chat-hy-mt "
                          "(default: chosen from the model; docs/models.md)"
    )
    n_ctx: int = Field(4096, ge=256, description="context window in tokens")
    n_threads: int | None = Field(None, ge=1, description="CPU threads (default: all cores)")
    n_gpu_layers: int = Field(0, description="layers offloaded to the GPU (-1 = all)")
    n_ubatch: int | None = Field(
        None, ge=1, description="rows llama.cpp computes at once (default: 48 on the CPU, "
                                "where 64 or more rows of several sequences cost a third "
                                "more each; 512 with GPU layers)")
    omp_wait_policy: Literal["auto", "active", "passive"] = Field(
        "auto", description="how idle CPU threads wait: auto (OpenMP default, fastest on a "
        "dedicated CPU), active, or passive (steadier when other processes share the cores)")
    parallel: int = Field(
        4, ge=1, le=256,
        description="sequences decoded together in each forward pass (llama.cpp's slots); "
                    "1 runs one sequence at a time")
    dict_dir: Path | None = Field(
        None, description="folder of drafter tables (<lang>.dict, <lang>.trigram.npz)")
    verbose_llama: bool = Field(False, description="show llama.cpp's own log lines")
    no_core_loans: bool = Field(
        False, description="on the CPU, run every pass on all --n-threads even while speech "
        "recognition or a voice computes on a core (by default the engine leaves it those "
        "cores meanwhile; docs/audio-in.md); for comparison")

    @field_validator("omp_wait_policy", "prompt_format", mode="before")
    @classmethod
    def _lowercase(cls, value: Any) -> Any:
        return lowercase(value)
