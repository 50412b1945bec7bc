"""The container files read without a Docker engine: `Dockerfile`, `docker-compose.yml`,
`.dockerignore` and the example worker's `clients/python/Dockerfile`, parsed, with the
fixtures the container tests share."""

from __future__ import annotations

import fnmatch
import json
import posixpath
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml

from app.cli import cli
from app.core.config import Settings
from jobq_client.cli import load_worker as cli_load_worker

REPO = Path(__file__).resolve().parents[1]


DOCKERFILE = REPO / "Dockerfile"


COMPOSE_FILE = REPO / "docker-compose.yml"


DOCKERIGNORE = REPO / ".dockerignore"


ENV_PREFIX = "JOBQ_"


ENTRYPOINT = ["python", "-m", "app"]


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str


@dataclass(frozen=True)
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction]

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction:
        found = self.all(keyword)
        assert found, f"no {keyword} in the stage FROM {self.base}"
        return found[-1]

    def env(self) -> dict[str, str]:
        """Every `ENV KEY=VALUE` of the stage (later ones win)."""
        values: dict[str, str] = {}
        for instruction in self.all("ENV"):
            for word in shlex.split(instruction.args):
                key, sep, value = word.partition("=")
                assert sep, f"ENV {instruction.args!r}: use the KEY=VALUE form"
                values[key] = value
        return values


def logical_lines(text: str) -> list[str]:
    """Instructions one per line: comments dropped, `\\` continuations joined."""
    lines: list[str] = []
    current = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue  # Docker drops comment lines even inside a continuation
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append(current + stripped)
        current = ""
    assert not current, "the Dockerfile ends inside a line continuation"
    return lines


def parse_dockerfile(text: str) -> list[Stage]:
    stages: list[Stage] = []
    for line in logical_lines(text):
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        args = args.strip()
        if keyword == "FROM":
            words = args.split()
            words = [w for w in words if not w.startswith("--")]
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(base=words[0], name=name, instructions=[]))
        else:
            assert stages or keyword == "ARG", f"{keyword} before the first FROM"
            if stages:
                stages[-1].instructions.append(Instruction(keyword, args))
    return stages


def exec_form(instruction: Instruction) -> list[str]:
    """The JSON (exec) form's argv; the shell form would hide signals from the app."""
    assert instruction.args.startswith("["), f"{instruction.keyword} must use the exec form"
    argv = json.loads(instruction.args)
    assert isinstance(argv, list)
    assert all(isinstance(word, str) for word in argv)
    return argv


def healthcheck_argv(stage: Stage) -> list[str]:
    match = re.fullmatch(
        r"(?P<options>(?:--[\w-]+=\S+\s+)*)CMD\s+(?P<command>\[.*\])",
        stage.last("HEALTHCHECK").args,
    )
    assert match, "HEALTHCHECK must be `[--option=value ...] CMD [exec form]`"
    return exec_form(Instruction("HEALTHCHECK", match["command"]))


def copied_paths(stage: Stage, context: Path = REPO) -> dict[str, str]:
    """Build-context path -> where it ends up in the image, for the stage's plain COPYs."""
    workdir = "/"
    targets: dict[str, str] = {}
    for instruction in stage.instructions:
        if instruction.keyword == "WORKDIR":
            workdir = posixpath.join(workdir, instruction.args)
        elif instruction.keyword == "COPY":
            words = shlex.split(instruction.args)
            if any(word.startswith("--from") for word in words):
                continue
            *sources, destination = [word for word in words if not word.startswith("--")]
            into = posixpath.normpath(posixpath.join(workdir, destination))
            for source in sources:
                name = posixpath.normpath(source)
                if (context / name).is_dir():
                    targets[name] = into  # a directory's *contents* are copied
                elif destination.endswith("/") or len(sources) > 1:
                    targets[name] = posixpath.join(into, posixpath.basename(name))
                else:
                    targets[name] = into
    return targets


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse_dockerfile(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def final(stages: list[Stage]) -> Stage:
    return stages[-1]


def environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment, whether written as a mapping or a KEY=VALUE list."""
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        return dict(str(item).partition("=")[::2] for item in raw)
    assert isinstance(raw, dict)
    return {str(key): "" if value is None else str(value) for key, value in raw.items()}


def depends_on(service: dict[str, Any]) -> dict[str, str]:
    """Dependency -> condition (the short list form means `service_started`)."""
    raw = service.get("depends_on") or {}
    if isinstance(raw, list):
        return dict.fromkeys(raw, "service_started")
    return {name: spec.get("condition", "service_started") for name, spec in raw.items()}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(document, dict)
    return document


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = compose["services"]
    assert isinstance(found, dict)
    assert {"postgres", "migrate", "jobq"} <= found.keys()
    return found


def settings_env_names() -> set[str]:
    return {ENV_PREFIX + name.upper() for name in Settings.model_fields}


def assert_valid_settings(env: dict[str, str], where: str) -> None:
    """Every JOBQ_ variable names a Settings field and holds a value that field accepts."""
    ours = {key: value for key, value in env.items() if key.upper().startswith(ENV_PREFIX)}
    unknown = set(map(str.upper, ours)) - settings_env_names()
    assert not unknown, f"{where}: {sorted(unknown)} are not Settings fields"
    Settings.model_validate({key[len(ENV_PREFIX) :].lower(): value for key, value in ours.items()})


def jobq_subcommands() -> set[str]:
    group = typer.main.get_group(cli)
    return set(group.commands)


def dockerignored(path: str, patterns: list[str]) -> bool:
    """Approximates Docker's rules: a matching pattern excludes the path and all below it."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        glob = pattern.removeprefix("!").strip("/")
        globs = {glob, glob.removeprefix("**/")}
        if any(fnmatch.fnmatchcase(p, g) for p in prefixes for g in globs):
            excluded = not negated
    return excluded


SDK_DIR = REPO / "clients" / "python"


WORKER_DOCKERFILE = SDK_DIR / "Dockerfile"


SDK_ENV_NAMES = {"JOBQ_URL", "JOBQ_API_KEY"}  # what jobq_client reads, not the service


WORKER_ENTRYPOINT = ["python", "-m", "jobq_client", "worker"]


def build_dir(service: dict[str, Any]) -> Path | None:
    build = service.get("build")
    if build is None:
        return None
    context = build if isinstance(build, str) else build.get("context", ".")
    return (COMPOSE_FILE.parent / context).resolve()


def runs_the_sdk(service: dict[str, Any]) -> bool:
    return build_dir(service) == SDK_DIR


@pytest.fixture(scope="module")
def worker_stages() -> list[Stage]:
    return parse_dockerfile(WORKER_DOCKERFILE.read_text())


@pytest.fixture
def load_worker(monkeypatch: pytest.MonkeyPatch) -> Any:
    """`jobq_client.cli.load_worker` as the image runs it: from clients/python."""
    monkeypatch.chdir(SDK_DIR)
    monkeypatch.syspath_prepend(str(SDK_DIR))
    return cli_load_worker
