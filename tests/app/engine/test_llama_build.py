"""The installed llama-cpp-python is one this project can run (``app.engine.llama_build``)."""

from __future__ import annotations

from app.engine.llama_build import amx_compiled, main


def test_amx_is_read_off_the_system_info() -> None:
    assert amx_compiled("CPU : AVX2 = 1 | AVX512 = 1 | AMX_INT8 = 1 | OPENMP = 1 |")
    assert not amx_compiled("CPU : AVX2 = 1 | AVX512 = 1 | OPENMP = 1 |")


def test_make_setup_installed_a_build_without_the_amx_kernels() -> None:
    # make setup rebuilds an AMX build (its kernels crash on the default model)
    assert main() == 0
