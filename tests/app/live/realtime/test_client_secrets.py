"""Client secrets: signed under the minting key, short-lived, never forged."""

from __future__ import annotations

import pytest

from app.live.realtime.client_secrets import ClientSecrets, SecretRefused


def test_a_secret_carries_its_session_and_owner_until_it_expires() -> None:
    secrets = ClientSecrets(["key-a", "key-b"])
    value = secrets.mint("key-b", {"audio": {"output": {"language": "de"}}}, 1000)
    assert value.startswith("ek_")
    grant = secrets.read(value, now=999)
    assert grant.session == {"audio": {"output": {"language": "de"}}}
    assert grant.owner is not None and grant.expires_at == 1000
    with pytest.raises(SecretRefused) as err:
        secrets.read(value, now=1000)
    assert err.value.code == "client_secret_expired"


@pytest.mark.parametrize("forge", [
    lambda v: v[:-2] + ("AA" if not v.endswith("AA") else "BB"),  # another signature
    lambda v: "ek_" + v[3:].replace(".", "x.", 1),  # altered payload
    lambda v: "ek_x",
    lambda v: "ek_" + "A" * 5000 + ".x",
    lambda v: "ek_%%%.%%%",
])
def test_forged_or_altered_secrets_are_refused(forge) -> None:
    secrets = ClientSecrets(["key-a"])
    value = secrets.mint("key-a", {}, 10**12)
    with pytest.raises(SecretRefused) as err:
        secrets.read(forge(value), now=0)
    assert err.value.code == "invalid_client_secret"


def test_a_secret_dies_with_the_key_that_minted_it_and_another_server_cannot_read_it(
        ) -> None:
    value = ClientSecrets(["old-key"]).mint("old-key", {}, 10**12)
    for other in (ClientSecrets(["new-key"]), ClientSecrets([])):
        with pytest.raises(SecretRefused):
            other.read(value, now=0)
    assert ClientSecrets(["old-key", "x"]).read(value, now=0).session == {}
