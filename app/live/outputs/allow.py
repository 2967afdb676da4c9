"""Which hosts pushes may reach: the operator's ``serve --output-allow-host`` list.

A speaker names the URL, so without a policy a speaker could make the server call into the
network it runs in (metadata services, admin ports, other tenants). Nothing is allowed by
default. An entry is one of:

- ``*``: any host name, public addresses only;
- ``*.example.org``: any name under ``example.org`` (not ``example.org`` itself), public
  addresses only;
- ``hooks.example.org``: that name exactly, whatever it resolves to (naming a host is the
  operator's word that it may be private);
- ``10.1.2.3``, ``::1``, ``10.0.0.0/8``: those addresses, also when a name resolves to them.

A private, loopback, link-local, shared, reserved, multicast or unspecified address is
refused unless an entry names it (an address or network entry, or the exact host name),
at ``start`` for an address in the URL and at every connection for what a name resolves
to (``app.live.outputs.net``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def normal_host(host: str) -> str:
    """``Hooks.Example.ORG.`` -> ``hooks.example.org``; ``[::1]`` -> ``::1``."""
    return host.strip().strip("[]").rstrip(".").lower()


def as_address(host: str) -> IPAddress | None:
    """The host as an IP address (an IPv4-mapped IPv6 one as IPv4), or None for a name."""
    try:
        addr = ipaddress.ip_address(normal_host(host).split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def is_public(addr: IPAddress) -> bool:
    """True for an address on the public internet; everything a server's own network,
    the machine itself or no one in particular could answer on is not."""
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return (addr.is_global and not addr.is_multicast and not addr.is_reserved
            and not addr.is_unspecified and not addr.is_link_local)


@dataclass(frozen=True)
class HostPolicy:
    """The operator's allowed hosts, parsed once (``from_entries``)."""

    any_host: bool = False
    names: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = ()  # ".example.org" for "*.example.org"
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def from_entries(cls, entries: Iterable[str]) -> HostPolicy:
        """Entries as ``serve --output-allow-host`` takes them (checked by the settings);
        an entry that is none of the forms is ignored rather than widening the policy."""
        any_host, names, suffixes, networks = False, set(), [], []
        for raw in entries:
            if raw.strip() == "*":
                any_host = True
                continue
            entry = normal_host(raw)
            if not entry or entry == "*":
                continue  # "*." and the like: nothing, never "any host"
            if entry.startswith("*."):
                if len(entry) > 2 and "*" not in entry[2:]:
                    suffixes.append(entry[1:])
            elif "/" in entry:
                try:
                    networks.append(ipaddress.ip_network(entry, strict=False))
                except ValueError:
                    continue
            elif (addr := as_address(entry)) is not None:
                networks.append(ipaddress.ip_network(addr))
            elif "*" not in entry:
                names.add(entry)
        return cls(any_host, frozenset(names), tuple(suffixes), tuple(networks))

    @property
    def empty(self) -> bool:
        return not (self.any_host or self.names or self.suffixes or self.networks)

    def named(self, addr: IPAddress) -> bool:
        """An address or network entry holds ``addr``."""
        return any(addr.version == net.version and addr in net for net in self.networks)

    def host_allowed(self, host: str) -> bool:
        """May a URL name this host? (At ``start``; addresses are checked again when
        connecting.) An address in the URL must be public, or named."""
        addr = as_address(host)
        if addr is not None:
            return self.named(addr) or (self.any_host and is_public(addr))
        name = normal_host(host)
        return (self.any_host or name in self.names
                or any(name.endswith(suffix) for suffix in self.suffixes))

    def address_allowed(self, host: str, addr: IPAddress) -> bool:
        """May a connection for ``host`` (allowed by ``host_allowed``) go to ``addr``, an
        address it resolved to? A non-public one only where the operator named it."""
        if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
            addr = addr.ipv4_mapped
        if self.named(addr):
            return True
        if not self.host_allowed(host):
            return False
        return is_public(addr) or normal_host(host) in self.names
