"""The lock (requirements/, written by `make lock`): every package pinned with its hashes,
the runtime set the development set's own versions, every bound of pyproject.toml met,
and this virtualenv running exactly the locked versions."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
RUNTIME_LOCK = REPO / "requirements" / "runtime.txt"
DEV_LOCK = REPO / "requirements" / "dev.txt"
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]

# `name==version [; marker]`, then one `--hash=sha256:…` per file of that release.
PIN = re.compile(
    r"^(?P<name>[A-Za-z0-9][\w.-]*)==(?P<version>[^\s;\\]+)\s*(?:;(?P<marker>[^\\]+))?"
)


@dataclass(frozen=True)
class Pin:
    name: str
    version: Version
    marker: Marker | None
    hashes: tuple[str, ...]

    def applies(self) -> bool:
        return self.marker is None or self.marker.evaluate()


def pins(lock: Path) -> list[Pin]:
    """The lock's requirements, each with its hashes; anything else but comments fails."""
    found: list[Pin] = []
    for line in lock.read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("--hash="):
            assert found, f"{lock.name}: a hash before any requirement"
            last = found[-1]
            digest = stripped.removeprefix("--hash=").rstrip(" \\")
            found[-1] = Pin(last.name, last.version, last.marker, (*last.hashes, digest))
            continue
        match = PIN.match(stripped)
        assert match, f"{lock.name}: {stripped!r} is not an exact pin"
        marker = match["marker"]
        found.append(
            Pin(
                canonicalize_name(match["name"]),
                Version(match["version"]),
                Marker(marker.strip()) if marker else None,
                (),
            )
        )
    return found


def applying(lock: Path) -> dict[str, Pin]:
    """The pins whose markers hold on this interpreter and platform, by name."""
    return {pin.name: pin for pin in pins(lock) if pin.applies()}


def test_every_locked_package_is_pinned_with_sha256_hashes() -> None:
    for lock in (RUNTIME_LOCK, DEV_LOCK):
        locked = pins(lock)
        assert len(locked) > 20
        for pin in locked:
            assert pin.hashes, f"{lock.name}: {pin.name} has no hash"
            assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in pin.hashes), pin


def test_the_runtime_lock_is_the_dev_locks_versions_without_the_tools() -> None:
    # By name and version: a package's markers may be wider in the development set.
    dev = {(pin.name, pin.version): pin.hashes for pin in pins(DEV_LOCK)}
    runtime = pins(RUNTIME_LOCK)
    for pin in runtime:
        assert dev.get((pin.name, pin.version)) == pin.hashes, f"{pin.name} {pin.version}"
    runtime_names = {pin.name for pin in runtime}
    for tool in ("pytest", "ruff", "mypy", "uv"):
        assert tool not in runtime_names, f"{tool} would ship in the image"


def test_the_locks_meet_every_bound_of_pyproject() -> None:
    """A bound raised (or a dependency added) without `make lock` fails here."""
    groups = {
        RUNTIME_LOCK: PROJECT["dependencies"],
        DEV_LOCK: PROJECT["dependencies"] + PROJECT["optional-dependencies"]["dev"],
    }
    for lock, requirements in groups.items():
        locked = applying(lock)
        for text in requirements:
            requirement = Requirement(text)
            if requirement.marker is not None and not requirement.marker.evaluate():
                continue
            name = canonicalize_name(requirement.name)
            assert name in locked, f"{name} is not in {lock.name}: run make lock"
            version = locked[name].version
            assert requirement.specifier.contains(version, prereleases=True), (
                f"{lock.name}: {name} {version} is outside {requirement.specifier}: run make lock"
            )


# Not in .ci/run's lowest-versions run, which installs the lowest versions allowed instead.
@pytest.mark.once("server")
def test_this_environment_runs_the_locked_versions() -> None:
    """`make test` installs the development lock: what runs the tests is what it says."""
    wrong: dict[str, tuple[str | None, str]] = {}
    for name, pin in applying(DEV_LOCK).items():
        try:
            installed = Version(metadata.version(name))
        except metadata.PackageNotFoundError:
            wrong[name] = (None, str(pin.version))
            continue
        if installed != pin.version:
            wrong[name] = (str(installed), str(pin.version))
    assert wrong == {}, "installed, locked; run make .venv/.installed-dev"
