"""Where jobq may send requests: the allowlist (`JOBQ_PUSH_ALLOWED_TARGETS`) and the
address check that keeps a target from reaching into jobq's own network (SSRF).

A pattern is `scheme://host[:port]`:

- `host` is a name or an IP literal (`hooks.example.com`, `127.0.0.1`, `[::1]`), `*`
  (any host) or `*.example.com` (any name under it, not the name itself);
- `port` is a number or `*`; without one, only the scheme's default port matches.

A URL is allowed when one pattern matches its scheme, host and port. Every address its
host resolves to must then be public (not loopback, link-local, private, shared,
multicast, reserved or unspecified) unless a matching pattern names the host exactly,
without a wildcard: `http://127.0.0.1:*` lets tests reach loopback, `https://*` never does.

    allowlist = Allowlist.parse(settings.push_allowed_targets)
    allowlist.check(url)                      # TargetNotAllowed, at configuration time
    address = await allowlist.resolve(url)    # ... and at each delivery: the address to
                                              # connect to, checked (see app.delivery.client)
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass

import httpx

from app.core.errors import TargetNotAllowed

DEFAULT_PORTS = {"http": 80, "https": 443}
# A host's checked addresses are used again for this long: a delivery does not wait on
# the resolver each time, and the address connected to is always one that was checked.
RESOLVED_TTL_SECONDS = 30.0

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class Pattern:
    """One allowlist entry."""

    scheme: str
    host: str  # lower case, IPv6 without brackets; `*` or `*.suffix` for wildcards
    port: int | None  # None: any port

    @classmethod
    def parse(cls, text: str) -> Pattern:
        """`scheme://host[:port]`, else ValueError."""
        scheme, sep, rest = text.strip().partition("://")
        scheme = scheme.lower()
        if not sep or scheme not in DEFAULT_PORTS or not rest or "/" in rest or "@" in rest:
            raise ValueError(f"push target pattern {text!r}: expected scheme://host[:port]")
        host, port_text = _split_port(rest)
        if not host or ("*" in host and host != "*" and not _suffix_wildcard(host)):
            raise ValueError(f"push target pattern {text!r}: bad host")
        if port_text == "*":
            port = None
        elif port_text is None:
            port = DEFAULT_PORTS[scheme]
        elif port_text.isdigit() and 0 < int(port_text) < 65536:
            port = int(port_text)
        else:
            raise ValueError(f"push target pattern {text!r}: bad port")
        return cls(scheme, host.lower(), port)

    @property
    def names_host(self) -> bool:
        """Whether the pattern names one host (no wildcard): private addresses allowed."""
        return "*" not in self.host

    def matches(self, scheme: str, host: str, port: int) -> bool:
        if scheme != self.scheme or (self.port is not None and port != self.port):
            return False
        if self.host == "*":
            return True
        if self.host.startswith("*."):
            return host.endswith(self.host[1:])
        return host == self.host


@functools.lru_cache(maxsize=1024)  # a delivery asks it of the same few URLs
def _permit(patterns: tuple[Pattern, ...], url: str) -> Permit:
    """`Allowlist.permit` of the allowlist of `patterns` (a refusal is raised, not kept)."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        raise TargetNotAllowed("The target is not a valid URL.") from None
    scheme, host = parsed.scheme, parsed.host.lower()
    if scheme not in DEFAULT_PORTS or not host or parsed.userinfo:
        raise TargetNotAllowed("A target is an http or https URL without credentials.")
    port = parsed.port or DEFAULT_PORTS[scheme]
    matching = [p for p in patterns if p.matches(scheme, host, port)]
    if not matching:
        raise TargetNotAllowed(
            f"{scheme}://{_bracketed(host)}:{port} matches no pattern of JOBQ_PUSH_ALLOWED_TARGETS."
        )
    permit = Permit(scheme, host, port, any(p.names_host for p in matching))
    literal = _ip(host)
    if literal is not None:
        _refuse_private(permit, [literal])
    return permit


def _suffix_wildcard(host: str) -> bool:
    return host.startswith("*.") and "*" not in host[2:] and len(host) > 2


def _split_port(rest: str) -> tuple[str, str | None]:
    if rest.startswith("["):  # [IPv6]
        host, _, after = rest[1:].partition("]")
        return host, after[1:] if after.startswith(":") else None
    host, sep, port = rest.rpartition(":")
    return (host, port) if sep else (rest, None)


def public(address: IPAddress) -> bool:
    """Whether `address` is on the public internet (an IPv4-mapped IPv6 address is
    judged as the IPv4 address it maps)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


@dataclass(frozen=True, slots=True)
class Permit:
    """A URL the allowlist lets through, and whether it may reach private addresses."""

    scheme: str
    host: str
    port: int
    private_ok: bool


class Allowlist:
    """The patterns of `JOBQ_PUSH_ALLOWED_TARGETS` and a cache of checked addresses."""

    def __init__(self, patterns: Iterable[Pattern]) -> None:
        self.patterns = tuple(patterns)
        self._resolved: dict[tuple[str, int, bool], tuple[float, IPAddress]] = {}

    @classmethod
    def parse(cls, texts: Iterable[str]) -> Allowlist:
        """The allowlist of the settings' patterns (ValueError for a bad one)."""
        return cls(Pattern.parse(text) for text in texts)

    def permit(self, url: str) -> Permit:
        """What the allowlist says of `url`: TargetNotAllowed unless a pattern matches.
        A host given as an IP literal is checked here too (no resolving needed)."""
        return _permit(self.patterns, url)

    def check(self, url: str) -> None:
        """TargetNotAllowed unless `url` may be a target (its host is not resolved:
        a name may resolve differently by the time of a delivery, which checks again)."""
        self.permit(url)

    async def resolve(self, url: str) -> tuple[Permit, IPAddress]:
        """The permit of `url` and the address to connect to: every address its host
        resolves to was checked (TargetNotAllowed otherwise, or when it resolves to
        none). Kept for `RESOLVED_TTL_SECONDS`."""
        permit = self.permit(url)
        key = (permit.host, permit.port, permit.private_ok)
        now = time.monotonic()
        cached = self._resolved.get(key)
        if cached is not None and cached[0] > now:
            return permit, cached[1]
        addresses = await _addresses(permit.host, permit.port)
        _refuse_private(permit, addresses)
        self._resolved[key] = (now + RESOLVED_TTL_SECONDS, addresses[0])
        return permit, addresses[0]


def _refuse_private(permit: Permit, addresses: list[IPAddress]) -> None:
    if permit.private_ok:
        return
    for address in addresses:
        if not public(address):
            raise TargetNotAllowed(
                f"{permit.host} resolves to {address}, which is not a public address;"
                " a pattern of JOBQ_PUSH_ALLOWED_TARGETS must name the host to allow it."
            )


def _ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


async def _addresses(host: str, port: int) -> list[IPAddress]:
    literal = _ip(host)
    if literal is not None:
        return [literal]
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        raise TargetNotAllowed(f"{host} does not resolve.") from None
    found = [ipaddress.ip_address(str(info[4][0]).partition("%")[0]) for info in infos]
    if not found:
        raise TargetNotAllowed(f"{host} does not resolve.")
    return found
