"""``--whip-udp-ports`` (``app.port_range.PortRange``, checked by the settings): LOW-HIGH,
within 1024-65535; every port of the range is tried once, from a random one on; a bad value
is one line naming the flag."""

from __future__ import annotations

import pytest

from app.port_range import PortRange
from app.settings import SettingsError, load_settings


def test_a_range_parses_and_lists_each_port_once() -> None:
    ports = PortRange.parse(" 50000-50009 ")
    assert (ports.low, ports.high, len(ports), str(ports)) == (50000, 50009, 10, "50000-50009")
    assert sorted(ports.candidates()) == list(range(50000, 50010))
    assert list(PortRange.parse("50000-50000").candidates()) == [50000]


@pytest.mark.parametrize("text", ["50000", "a-b", "50100-50000", "80-90", "60000-70000",
                                  "-5-10", ""])
def test_a_bad_range_is_refused_with_the_form_to_use(text: str) -> None:
    with pytest.raises(ValueError):
        PortRange.parse(text)


def test_the_settings_check_the_range_and_the_public_address(monkeypatch) -> None:
    monkeypatch.setenv("LIVETRANS_WHIP_UDP_PORTS", "50000-50049")
    monkeypatch.setenv("LIVETRANS_WHIP_PUBLIC_IP", "203.0.113.7")
    s = load_settings()
    assert s.whip_udp_ports == "50000-50049" and s.whip_public_ip == "203.0.113.7"
    monkeypatch.setenv("LIVETRANS_WHIP_UDP_PORTS", "")  # compose's unset variable
    monkeypatch.setenv("LIVETRANS_WHIP_PUBLIC_IP", "")
    s = load_settings()
    assert s.whip_udp_ports is None and s.whip_public_ip is None
    monkeypatch.delenv("LIVETRANS_WHIP_UDP_PORTS")
    monkeypatch.delenv("LIVETRANS_WHIP_PUBLIC_IP")
    for name, value, flag in (("whip_udp_ports", "50000:50100", "--whip-udp-ports"),
                              ("whip_public_ip", "my-host", "--whip-public-ip"),
                              ("whip_public_ip", "0.0.0.0", "--whip-public-ip")):
        with pytest.raises(SettingsError) as bad:
            load_settings(**{name: value})
        assert flag in str(bad.value) and "\n" not in str(bad.value)
