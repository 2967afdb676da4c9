"""Is the installed llama-cpp-python a build this project can run? (``make setup`` asks.)

llama.cpp's AMX kernels (Intel Sapphire Rapids and later) crash in
``ggml_backend_amx_mul_mat`` on the default Q4_K_M model (llama.cpp issue 20824; seen
here on the project's 2-core VMs: a segmentation fault at the first forward pass). A native
build compiles them in whenever the build machine has AMX, so ``make setup`` builds with
``-mno-amx-*`` and, should an AMX build already be installed (pip's wheel cache keeps one
built without the flags), rebuilds it: this check exits 1 for such a build.
"""

from __future__ import annotations

import sys

from app.engine.llama_lib import import_llama


def system_info() -> str:
    return import_llama().llama_print_system_info().decode("utf-8", "replace")


def amx_compiled(info: str | None = None) -> bool:
    """Whether the build carries the AMX kernels (``AMX_INT8 = 1`` in its system info)."""
    text = system_info() if info is None else info
    return "AMX_INT8 = 1" in text


def main() -> int:
    if amx_compiled():
        print("llama-cpp-python was built with llama.cpp's AMX kernels, which crash on "
              "this model (llama.cpp issue 20824): rebuilding without them", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
