"""schemathesis against the server's own OpenAPI schema: no input gives a 5xx."""

from __future__ import annotations

import itertools

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable

from tests.conftest import LiveServer


@pytest.fixture(scope="module")
def fuzz_server():
    # Small limits keep each generated request cheap on a CPU.
    with LiveServer(max_new_tokens=8, max_source_chars=300, queue_size=8) as server:
        yield server


def test_no_input_gives_a_server_error(fuzz_server) -> None:
    """Every operation of the schema, with generated (valid and invalid) inputs."""
    schema = schemathesis.openapi.from_url(fuzz_server.url + "/openapi.json")
    checked = []
    for (result, mode) in itertools.product(schema.get_all_operations(),
                                          list(schemathesis.GenerationMode)):
        operation = result.ok()

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck),
                  derandomize=True, database=None)
        def run(case) -> None:
            response = case.call(timeout=120)
            assert response.status_code < 500, (case.method, case.path, response.text[:300])
            if response.status_code >= 400:
                assert "error" in response.json()

        try:
            run()
        except Unsatisfiable:  # no invalid input exists (an operation without parameters)
            continue
        checked.append(f"{operation.method.upper()} {operation.path} ({mode.value})")
    assert "POST /v1/chat/completions (negative)" in checked
