"""The container files, checked without a Docker engine.

`Dockerfile` and `docker-compose.yml` are read as text/YAML and checked against the
code they package: the settings they set must be real `Settings` fields, the
commands they run must be real `jobq` subcommands, and the files they copy must land
where the code looks for them. The image's entrypoint (`python -m app`) and its
HEALTHCHECK command are then run for real, against the test database.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import os
import posixpath
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import httpx
import pytest
import typer.main
import yaml
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

import app as app_package
from app.cli import cli
from app.core.config import Settings
from app.db import migrate
from app.db.embedded import quote_ident
from app.db.url import async_url, with_database
from jobq_client import Worker
from jobq_client.cli import load_worker as cli_load_worker
from tests.sdk_support import clean_env, eventually, start_service, stop_process

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "Dockerfile"
COMPOSE_FILE = REPO / "docker-compose.yml"
DOCKERIGNORE = REPO / ".dockerignore"
ENV_PREFIX = "JOBQ_"
ENTRYPOINT = ["python", "-m", "app"]
FRESH_DATABASE = "jobq_test_container"
SUBPROCESS_TIMEOUT_SECONDS = 60.0
SERVE_START_TIMEOUT_SECONDS = 30.0


# --- Dockerfile parsing ------------------------------------------------------------


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


# --- docker-compose.yml parsing ----------------------------------------------------


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


# --- Dockerfile --------------------------------------------------------------------


def test_dockerfile_is_multi_stage_on_one_base(stages: list[Stage]) -> None:
    assert len(stages) >= 2
    builder = stages[0]
    assert builder.name, "the builder stage needs a name for COPY --from"
    # The venv's python is a symlink to the base image's interpreter: same base both ends.
    assert stages[-1].base == builder.base
    assert re.fullmatch(r"python:3\.(1[1-9]|[2-9]\d)[\w.-]*-slim[\w.-]*", builder.base)


def test_builder_installs_runtime_dependencies_only(stages: list[Stage]) -> None:
    builder = stages[0]
    copied = copied_paths(builder)
    assert "pyproject.toml" in copied
    runs = " ".join(i.args for i in builder.all("RUN"))
    assert "/opt/venv" in runs
    assert "pip install" in runs
    extras = [e for group in re.findall(r"\[([\w,-]+)\]", runs) for e in group.split(",")]
    assert "dev" not in extras


def test_final_stage_uses_the_venv(final: Stage, stages: list[Stage]) -> None:
    venv_copies = [
        shlex.split(i.args)
        for i in final.all("COPY")
        if i.args.startswith(f"--from={stages[0].name} ")
    ]
    assert ["--from=" + str(stages[0].name), "/opt/venv", "/opt/venv"] in venv_copies
    assert final.env()["PATH"].startswith("/opt/venv/bin:")


def test_final_stage_runs_as_a_non_root_user(final: Stage) -> None:
    user, _, group = final.last("USER").args.partition(":")
    assert user not in {"", "root", "0"}
    assert group not in {"root", "0"}


def test_entrypoint_is_the_jobq_command_serving_by_default(final: Stage) -> None:
    assert exec_form(final.last("ENTRYPOINT")) == ENTRYPOINT
    command = exec_form(final.last("CMD"))
    assert command == ["serve"]
    assert command[0] in jobq_subcommands()


def test_environment_is_real_settings(final: Stage) -> None:
    env = final.env()
    assert env["JOBQ_HOST"] == "0.0.0.0"
    assert env["JOBQ_PORT"] == "8000"
    assert env["JOBQ_DATA_DIR"] == "/var/lib/jobq"
    assert "JOBQ_DATABASE_URL" not in env, "a URL baked into the image would hold a password"
    assert_valid_settings(env, "Dockerfile")


def test_data_dir_is_a_volume_and_the_port_is_exposed(final: Stage) -> None:
    env = final.env()
    volumes = final.last("VOLUME").args
    listed = json.loads(volumes) if volumes.startswith("[") else volumes.split()
    assert env["JOBQ_DATA_DIR"] in listed
    assert env["JOBQ_PORT"] in final.last("EXPOSE").args.split()
    # Created (and handed to the user) before the VOLUME line freezes its ownership.
    creating = [i for i in final.all("RUN") if env["JOBQ_DATA_DIR"] in i.args]
    assert creating
    assert final.instructions.index(creating[0]) < final.instructions.index(final.last("VOLUME"))


def test_code_and_migrations_are_copied_where_the_code_looks(final: Stage) -> None:
    copied = copied_paths(final)
    assert {"app", "alembic", "alembic.ini"} <= copied.keys()
    home = final.env()["PYTHONPATH"]
    assert home == "/srv/jobq"
    assert copied["app"] == f"{home}/app", "`import app` needs app/ directly on PYTHONPATH"
    assert copied["alembic.ini"] == f"{home}/alembic.ini"
    # app/db/migrate.py finds the migrations relative to its own file: the image must keep
    # alembic/ where it is in the repository, relative to the app package.
    package_home = Path(app_package.__file__).resolve().parent.parent
    alembic_relative = migrate.ALEMBIC_DIR.relative_to(package_home).as_posix()
    assert str(PurePosixPath(copied["app"]).parent / alembic_relative) == copied["alembic"]


def test_healthcheck_probes_healthz_with_python(final: Stage) -> None:
    argv = healthcheck_argv(final)
    assert argv[:2] == ["python", "-c"]
    assert "/healthz" in argv[2]
    assert "127.0.0.1" in argv[2]
    assert "curl" not in final.last("HEALTHCHECK").args


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


def test_dockerignore_keeps_the_sources_and_drops_local_state() -> None:
    patterns = [
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    needed = ["pyproject.toml", "alembic.ini", "app/py.typed", "alembic/script.py.mako"]
    needed += [
        str(p.relative_to(REPO)) for d in ("app", "alembic") for p in (REPO / d).rglob("*.py")
    ]
    assert len(needed) > 10
    assert [path for path in needed if dockerignored(path, patterns)] == []
    for local in (".venv", ".git", ".jobq", "app/__pycache__", ".mypy_cache", "node_modules"):
        assert dockerignored(local, patterns), f"{local} would be sent to the builder"


# --- docker-compose.yml ------------------------------------------------------------


def test_postgres_service_is_healthchecked_with_a_volume(
    compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    postgres = services["postgres"]
    image, _, tag = postgres["image"].partition(":")
    assert image == "postgres"
    major = int(tag.split(".")[0].split("-")[0])
    assert major >= 16
    env = environment(postgres)
    assert env["POSTGRES_PASSWORD"]
    test = postgres["healthcheck"]["test"]
    probe = test if isinstance(test, list) else ["CMD-SHELL", test]
    assert "pg_isready" in " ".join(probe)
    if "POSTGRES_USER" in env:
        assert env["POSTGRES_USER"] in probe or f"-U {env['POSTGRES_USER']}" in " ".join(probe)
    # The image keeps its data here; 18 moved it up a level.
    data = "/var/lib/postgresql" if major >= 18 else "/var/lib/postgresql/data"
    mounts = [str(v).split(":") for v in postgres["volumes"]]
    named = [m for m in mounts if len(m) >= 2 and m[1] == data]
    assert named, f"no volume mounted at {data}"
    assert named[0][0] in (compose.get("volumes") or {}), "use a named (top-level) volume"


def test_jobq_services_build_one_image_and_run_real_subcommands(
    services: dict[str, dict[str, Any]],
) -> None:
    migrate_service, jobq = services["migrate"], services["jobq"]
    for service in (migrate_service, jobq):
        build = service["build"]
        context = build if isinstance(build, str) else build.get("context", ".")
        assert (COMPOSE_FILE.parent / context / "Dockerfile").resolve() == DOCKERFILE
    assert migrate_service.get("image") == jobq.get("image")
    assert migrate_service["command"] == ["migrate"]
    assert jobq["command"] == ["serve"]
    assert {"migrate", "serve"} <= jobq_subcommands()


def test_migrate_runs_once_after_postgres_is_healthy(services: dict[str, dict[str, Any]]) -> None:
    migrate_service = services["migrate"]
    assert migrate_service["restart"] == "no"
    assert depends_on(migrate_service) == {"postgres": "service_healthy"}
    assert "ports" not in migrate_service


def test_jobq_waits_for_postgres_and_migrations_and_publishes_8000(
    services: dict[str, dict[str, Any]], final: Stage
) -> None:
    jobq = services["jobq"]
    assert depends_on(jobq) == {
        "postgres": "service_healthy",
        "migrate": "service_completed_successfully",
    }
    env = final.env() | environment(jobq)
    assert env["JOBQ_HOST"] == "0.0.0.0", "a container must listen beyond its loopback"
    # No key exists in the demo: on 0.0.0.0 jobq refuses to start unless auth is disabled,
    # and then only the host's loopback may reach it.
    assert env["JOBQ_AUTH"] == "disabled"
    published = [str(p) for p in jobq["ports"]]
    assert published == [f"127.0.0.1:8000:{env['JOBQ_PORT']}"]


def test_every_jobq_variable_is_a_setting(services: dict[str, dict[str, Any]]) -> None:
    seen = 0
    for name, service in services.items():
        if runs_the_sdk(service):
            continue  # its JOBQ_ variables are the SDK's: see test_worker_service_*
        env = environment(service)
        assert_valid_settings(env, f"service {name}")
        seen += sum(key.startswith(ENV_PREFIX) for key in env)
    assert seen >= 3


def test_database_url_points_at_the_postgres_service(services: dict[str, dict[str, Any]]) -> None:
    postgres = environment(services["postgres"])
    user = postgres.get("POSTGRES_USER", "postgres")
    database = postgres.get("POSTGRES_DB", user)
    for name in ("migrate", "jobq"):
        raw = environment(services[name])["JOBQ_DATABASE_URL"]
        url = make_url(raw)
        assert url.drivername in {"postgresql", "postgres", "postgresql+asyncpg"}
        assert url.host == "postgres"
        assert url.port in {None, 5432}
        assert url.username == user
        assert url.password == postgres["POSTGRES_PASSWORD"]
        assert url.database == database
        assert async_url(raw).drivername == "postgresql+asyncpg"


# --- the entrypoint, run for real --------------------------------------------------


def run_entrypoint(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m app ARGS` as the image runs it (sys.executable stands in for python)."""
    return subprocess.run(
        [sys.executable, *ENTRYPOINT[1:], *args],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT_SECONDS,
        check=False,
    )


def test_entrypoint_help_lists_the_subcommands() -> None:
    result = run_entrypoint("--help")
    assert result.returncode == 0, result.stderr
    for command in ("serve", "migrate", "openapi"):
        assert command in result.stdout


def test_entrypoint_writes_the_openapi_document_to_stdout() -> None:
    result = run_entrypoint("openapi", "-o", "-")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert "paths" in document
    assert "/healthz" in document["paths"]


def test_entrypoint_migrate_on_a_migrated_database(database_url: str) -> None:
    result = run_entrypoint("migrate", env={"JOBQ_DATABASE_URL": database_url})
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "schema is up to date" in output


async def _execute_on_server(server_url: str, *statements: str) -> None:
    """Run statements on the server's `postgres` database, outside any transaction."""
    engine = create_async_engine(
        async_url(with_database(server_url, "postgres")),
        poolclass=NullPool,
        isolation_level="AUTOCOMMIT",
    )
    try:
        async with engine.connect() as conn:
            for statement in statements:
                await conn.execute(text(statement))
    finally:
        await engine.dispose()


async def _recreate_empty(server_url: str) -> str:
    database = quote_ident(FRESH_DATABASE)
    await _execute_on_server(
        server_url,
        f"DROP DATABASE IF EXISTS {database} WITH (FORCE)",
        f"CREATE DATABASE {database}",
    )
    return with_database(server_url, FRESH_DATABASE)


async def _schema_state(url: str) -> tuple[str | None, bool]:
    """(Alembic revision or None, whether jobq.jobs exists)."""
    engine = create_async_engine(async_url(url), poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            versioned = await conn.scalar(text("SELECT to_regclass('jobq.alembic_version')"))
            version = (
                await conn.scalar(text("SELECT version_num FROM jobq.alembic_version"))
                if versioned is not None
                else None
            )
            jobs = await conn.scalar(text("SELECT to_regclass('jobq.jobs')"))
    finally:
        await engine.dispose()
    return version, jobs is not None


@pytest.fixture
def empty_database_url(server_url: str) -> Iterator[str]:
    """A database of this module's own, recreated with no schema: what `migrate` meets first."""
    url = asyncio.run(_recreate_empty(server_url))
    yield url
    asyncio.run(
        _execute_on_server(
            server_url, f"DROP DATABASE IF EXISTS {quote_ident(FRESH_DATABASE)} WITH (FORCE)"
        )
    )


def test_entrypoint_migrate_creates_the_schema_on_an_empty_database(
    empty_database_url: str,
) -> None:
    assert asyncio.run(_schema_state(empty_database_url)) == (None, False)
    result = run_entrypoint("migrate", env={"JOBQ_DATABASE_URL": empty_database_url})
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "schema is up to date" in output
    head = ScriptDirectory.from_config(migrate.alembic_config()).get_current_head()
    assert asyncio.run(_schema_state(empty_database_url)) == (head, True)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def run_healthcheck(argv: list[str], port: int) -> int:
    assert argv[0] == "python"
    return subprocess.run(
        [sys.executable, *argv[1:]],
        env={**os.environ, "JOBQ_PORT": str(port)},
        capture_output=True,
        timeout=SUBPROCESS_TIMEOUT_SECONDS,
        check=False,
    ).returncode


def test_serve_passes_the_image_healthcheck_and_stops_cleanly_on_sigterm(
    final: Stage, empty_database_url: str
) -> None:
    """What `docker run` then `docker stop` does: serve, get healthy, SIGTERM, exit 0."""
    probe = healthcheck_argv(final)
    port = free_port()
    assert run_healthcheck(probe, port) != 0, "the probe passes with nothing listening"
    server = subprocess.Popen(
        [sys.executable, *ENTRYPOINT[1:], *exec_form(final.last("CMD"))],
        cwd=REPO,
        env={
            **os.environ,
            "JOBQ_DATABASE_URL": empty_database_url,
            "JOBQ_HOST": "127.0.0.1",
            "JOBQ_PORT": str(port),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + SERVE_START_TIMEOUT_SECONDS
        while run_healthcheck(probe, port) != 0:
            assert server.poll() is None, "serve exited before it got healthy"
            assert time.monotonic() < deadline, "serve never got healthy"
            time.sleep(0.2)
        server.send_signal(signal.SIGTERM)
        output, _ = server.communicate(timeout=SUBPROCESS_TIMEOUT_SECONDS)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    assert server.returncode == 0, output
    assert "schema is up to date" in output


# --- the example Python worker: clients/python/Dockerfile and its compose service ----

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


def test_worker_image_is_slim_multi_stage_non_root_with_the_sdk_only(
    worker_stages: list[Stage],
) -> None:
    builder, final_stage = worker_stages[0], worker_stages[-1]
    assert len(worker_stages) >= 2 and builder.name
    assert final_stage.base == builder.base
    assert re.fullmatch(r"python:3\.(1[1-9]|[2-9]\d)[\w.-]*-slim[\w.-]*", builder.base)
    runs = " ".join(i.args for i in builder.all("RUN"))
    assert "pip install ." in runs and "[" not in runs.split("pip install", 1)[1]
    for source in copied_paths(builder, SDK_DIR):
        assert (SDK_DIR / source).exists(), f"COPY {source}: not in the build context"
    for source in copied_paths(final_stage, SDK_DIR):
        assert (SDK_DIR / source).exists(), f"COPY {source}: not in the build context"
    user, _, group = final_stage.last("USER").args.partition(":")
    assert user not in {"", "root", "0"} and group not in {"root", "0"}
    assert final_stage.env()["PATH"].startswith("/opt/venv/bin:")


def test_worker_image_entrypoint_names_a_real_worker(
    worker_stages: list[Stage], load_worker: Any
) -> None:
    final_stage = worker_stages[-1]
    assert exec_form(final_stage.last("ENTRYPOINT")) == WORKER_ENTRYPOINT
    (target,) = exec_form(final_stage.last("CMD"))
    worker = load_worker(target)
    assert isinstance(worker, Worker)
    assert worker.handlers and worker.queues == ["images"]
    # The image's working directory holds the example, as the import needs.
    assert copied_paths(final_stage, SDK_DIR)["examples"] == "/srv/worker/examples"
    assert final_stage.last("WORKDIR").args == "/srv/worker"


def test_worker_service_runs_the_example_against_the_jobq_service(
    services: dict[str, dict[str, Any]], worker_stages: list[Stage], final: Stage, load_worker: Any
) -> None:
    worker = services["worker"]
    assert runs_the_sdk(worker)
    (target,) = worker["command"]
    assert load_worker(target).queues == ["images"]
    env = environment(worker)
    ours = {key for key in env if key.startswith(ENV_PREFIX)}
    assert ours <= SDK_ENV_NAMES, f"{sorted(ours - SDK_ENV_NAMES)} are not read by jobq_client"
    url = make_url(env["JOBQ_URL"].replace("http://", "postgresql://", 1))
    assert (url.host, url.port) == ("jobq", int(final.env()["JOBQ_PORT"]))
    assert depends_on(worker) == {"jobq": "service_healthy"}
    assert "ports" not in worker


def test_every_dependency_condition_can_be_met(services: dict[str, dict[str, Any]]) -> None:
    """`service_healthy` needs a healthcheck; `service_completed_successfully` a one-shot."""
    for name, service in services.items():
        for dependency, condition in depends_on(service).items():
            target = services[dependency]
            if condition == "service_healthy":
                check = target.get("healthcheck") or {}
                assert not check.get("disable"), f"{name} waits on {dependency}'s healthcheck"
                directory = build_dir(target)
                in_image = directory is not None and any(
                    stage.all("HEALTHCHECK")
                    for stage in parse_dockerfile((directory / "Dockerfile").read_text())[-1:]
                )
                assert check.get("test") or in_image, f"{dependency} has no healthcheck"
            elif condition == "service_completed_successfully":
                assert target.get("restart") == "no", f"{dependency} must run once"
            else:
                assert condition == "service_started", condition


async def test_worker_image_command_runs_jobs_and_stops_on_sigterm(
    database_url: str, db: Any, tmp_path: Path
) -> None:
    """What `docker compose up worker` runs, run directly against a real service."""
    stages = parse_dockerfile(WORKER_DOCKERFILE.read_text())
    argv = exec_form(stages[-1].last("ENTRYPOINT")) + exec_form(stages[-1].last("CMD"))
    service = await asyncio.to_thread(start_service, database_url, tmp_path / "serve.log")
    log = tmp_path / "worker.log"
    try:
        async with httpx.AsyncClient(base_url=service.url) as http:
            created = await http.post(
                "/v1/queues/images/jobs",
                json={"type": "resize", "payload": {"width": 1920, "height": 1080}},
            )
            assert created.status_code == 201, created.text
            with log.open("wb") as output:
                worker = subprocess.Popen(
                    [sys.executable, *argv[1:]],
                    cwd=SDK_DIR,
                    env=clean_env(JOBQ_URL=service.url),
                    stdout=output,
                    stderr=subprocess.STDOUT,
                )
            try:

                async def finished() -> dict[str, Any] | None:
                    job: dict[str, Any] = (
                        await http.get(f"/v1/jobs/{created.json()['id']}")
                    ).json()
                    return job if job["state"] == "succeeded" else None

                job = await eventually(finished, timeout=30)
            finally:
                code = await asyncio.to_thread(stop_process, worker)
    finally:
        await asyncio.to_thread(stop_process, service.process)
    assert job["result"] == {"width": 640, "height": 360}
    assert job["progress"]["stage"] == "upload"
    assert code == 0, log.read_text()
