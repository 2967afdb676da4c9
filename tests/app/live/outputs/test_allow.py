"""The host policy of pushes (``serve --output-allow-host``)."""

from __future__ import annotations

import ipaddress

import pytest

from app.live.outputs.allow import HostPolicy, as_address, is_public

ip = ipaddress.ip_address


def test_nothing_is_allowed_by_default() -> None:
    policy = HostPolicy.from_entries([])
    assert policy.empty
    assert not policy.host_allowed("upload.youtube.com")
    assert not policy.host_allowed("8.8.8.8")


def test_names_wildcards_and_any() -> None:
    policy = HostPolicy.from_entries(["Upload.YouTube.com.", "*.example.org"])
    assert policy.host_allowed("upload.youtube.com")
    assert policy.host_allowed("UPLOAD.youtube.com.")
    assert not policy.host_allowed("youtube.com")
    assert policy.host_allowed("a.b.example.org")
    assert not policy.host_allowed("example.org")
    assert not policy.host_allowed("badexample.org")
    anyone = HostPolicy.from_entries(["*"])
    assert anyone.host_allowed("whatever.test")
    assert anyone.host_allowed("8.8.8.8")
    assert not anyone.host_allowed("127.0.0.1")  # an address in the URL: public only
    assert not HostPolicy.from_entries(["*."]).host_allowed("x.org")  # never "any"


@pytest.mark.parametrize("address", [
    "127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1",
    "0.0.0.0", "224.0.0.1", "255.255.255.255", "::1", "::", "fe80::1", "fc00::1",
    "::ffff:127.0.0.1", "::ffff:10.0.0.1",
])
def test_non_public_addresses(address) -> None:
    assert not is_public(ip(address))
    anyone = HostPolicy.from_entries(["*", "*.example.org", "hooks.example.org"])
    assert not anyone.address_allowed("x.example.org", ip(address))
    assert not anyone.address_allowed("somewhere.test", ip(address))
    # naming the host exactly, or the address, allows it
    assert anyone.address_allowed("hooks.example.org", ip(address))
    assert HostPolicy.from_entries([address]).address_allowed("any.name", ip(address))


def test_public_addresses_follow_the_name_rules() -> None:
    policy = HostPolicy.from_entries(["*.example.org"])
    assert policy.address_allowed("a.example.org", ip("93.184.216.34"))
    assert not policy.address_allowed("a.example.com", ip("93.184.216.34"))


def test_networks_name_their_addresses() -> None:
    policy = HostPolicy.from_entries(["10.0.0.0/8", "fd00::/8", "nonsense/99"])
    assert policy.host_allowed("10.9.8.7")
    assert not policy.host_allowed("11.0.0.1")
    assert policy.host_allowed("[fd00::5]")
    assert policy.address_allowed("whatever", ip("10.1.1.1"))
    assert policy.address_allowed("whatever", ip("::ffff:10.1.1.1"))
    assert not policy.address_allowed("whatever", ip("192.168.0.1"))


def test_as_address() -> None:
    assert as_address("[::1]") == ip("::1")
    assert as_address("::ffff:127.0.0.1") == ip("127.0.0.1")
    assert as_address("localhost") is None
