"""The push allowlist (`app.delivery.allowlist`): which URLs match, and which addresses
a target may reach (SSRF), without a network."""

from __future__ import annotations

import ipaddress

import pytest

from app.core.config import Settings
from app.core.errors import TargetNotAllowed
from app.delivery import Allowlist, Pattern
from app.delivery.allowlist import public


def test_the_settings_read_comma_separated_patterns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBQ_PUSH_ALLOWED_TARGETS", "https://*, http://127.0.0.1:*")
    assert Settings().push_allowed_targets == ("https://*", "http://127.0.0.1:*")
    monkeypatch.delenv("JOBQ_PUSH_ALLOWED_TARGETS")
    assert Settings().push_allowed_targets == ("https://*",)


@pytest.mark.parametrize(
    "text",
    ["ftp://x", "https://", "example.com", "https://a.*.com", "https://x/path", "https://x:0",
     "https://x:port", "https://u@x"],
)  # fmt: skip
def test_a_malformed_pattern_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="push target pattern"):
        Pattern.parse(text)


@pytest.mark.parametrize(
    ("patterns", "url", "allowed"),
    [
        (["https://*"], "https://hooks.example.com/x", True),
        (["https://*"], "http://hooks.example.com/x", False),  # scheme
        (["https://*"], "https://hooks.example.com:8443/x", False),  # default port only
        (["https://*:*"], "https://hooks.example.com:8443/x", True),
        (["https://*.example.com"], "https://a.b.example.com/", True),
        (["https://*.example.com"], "https://example.com/", False),
        (["https://*.example.com"], "https://badexample.com/", False),
        (["http://hooks.example.com:8080"], "http://HOOKS.example.com:8080/", True),
        (["http://[::1]:*"], "http://[::1]:9000/", True),
        ([], "https://hooks.example.com/", False),
    ],
)
def test_a_url_is_allowed_when_a_pattern_matches_it(
    patterns: list[str], url: str, allowed: bool
) -> None:
    allowlist = Allowlist.parse(patterns)
    if allowed:
        allowlist.check(url)
    else:
        with pytest.raises(TargetNotAllowed):
            allowlist.check(url)


@pytest.mark.parametrize(
    "url",
    ["https://user:pw@hooks.example.com/", "ftp://hooks.example.com/", "not a url", "https:///x"],
)
def test_what_is_no_http_target_is_refused(url: str) -> None:
    with pytest.raises(TargetNotAllowed):
        Allowlist.parse(["https://*", "http://*"]).check(url)


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1",
     "0.0.0.0", "224.0.0.1", "::1", "fe80::1", "fc00::1", "::ffff:127.0.0.1", "::"],
)  # fmt: skip
def test_loopback_link_local_and_private_addresses_are_not_public(address: str) -> None:
    assert not public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["93.184.215.14", "2606:4700::6810:84e5", "8.8.8.8"])
def test_internet_addresses_are_public(address: str) -> None:
    assert public(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "url",
    ["https://127.0.0.1/", "https://169.254.169.254/latest/meta-data", "https://[::1]/",
     "https://10.0.0.5/", "https://[::ffff:10.0.0.5]/"],
)  # fmt: skip
def test_a_wildcard_never_lets_a_private_address_through(url: str) -> None:
    with pytest.raises(TargetNotAllowed, match="not a public address"):
        Allowlist.parse(["https://*"]).check(url)


async def test_a_name_resolving_to_loopback_is_refused_unless_a_pattern_names_it() -> None:
    with pytest.raises(TargetNotAllowed, match="not a public address"):
        await Allowlist.parse(["http://*:*"]).resolve("http://localhost:8000/")
    permit, address = await Allowlist.parse(["http://localhost:*"]).resolve(
        "http://localhost:8000/"
    )
    assert permit.private_ok and not public(address)


async def test_a_name_that_does_not_resolve_is_refused() -> None:
    with pytest.raises(TargetNotAllowed, match="does not resolve"):
        await Allowlist.parse(["https://*"]).resolve("https://no-such-host.invalid/")


def test_a_pattern_naming_an_ip_allows_that_address_only() -> None:
    allowlist = Allowlist.parse(["http://127.0.0.1:*"])
    allowlist.check("http://127.0.0.1:9000/hook")
    with pytest.raises(TargetNotAllowed):
        allowlist.check("http://127.0.0.2:9000/hook")
