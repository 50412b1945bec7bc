"""The images' Dockerfiles, read as text and checked against the code they package: the
settings they set are real `Settings` fields, the commands they run real `jobq`
subcommands, and the files they copy land where the code looks for them."""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from pathlib import Path, PurePosixPath
from typing import Any

import app as app_package
from app.db import migrate
from jobq_client import Worker
from tests.container_files import (
    DOCKERIGNORE,
    ENTRYPOINT,
    REPO,
    SDK_DIR,
    WORKER_ENTRYPOINT,
    Stage,
    assert_valid_settings,
    copied_paths,
    dockerignored,
    exec_form,
    healthcheck_argv,
    jobq_subcommands,
)

# The locks `make lock` writes (tests/unit/test_lock.py), as build-context paths.
RUNTIME_LOCK = "requirements/runtime.txt"
DEV_LOCK = "requirements/dev.txt"


def test_dockerfile_is_multi_stage_on_one_base(stages: list[Stage]) -> None:
    assert len(stages) >= 2
    builder = stages[0]
    assert builder.name, "the builder stage needs a name for COPY --from"
    # The venv's python is a symlink to the base image's interpreter: same base both ends.
    assert stages[-1].base == builder.base
    assert re.fullmatch(r"python:3\.(1[1-9]|[2-9]\d)[\w.-]*-slim[\w.-]*", builder.base)


def test_builder_installs_the_runtime_lock_and_nothing_else(stages: list[Stage]) -> None:
    builder = stages[0]
    copied = copied_paths(builder)
    assert RUNTIME_LOCK in copied, "the image is built from the runtime lock"
    assert DEV_LOCK not in copied and "pyproject.toml" not in copied
    runs = [i.args for i in builder.all("RUN")]
    assert any("/opt/venv" in run for run in runs)
    installs = [
        shlex.split(command)
        for run in runs
        for command in re.split(r"&&|;", run)
        if "pip install" in command
    ]
    # One install, of the lock as copied, every file checked against the lock's hashes:
    # nothing unpinned (a bare name, an extra, `.`) can join it.
    assert len(installs) == 1
    (words,) = installs
    assert "--require-hashes" in words
    arguments = [w for w in words[words.index("install") + 1 :] if w != "--require-hashes"]
    assert arguments == [
        "-r",
        posixpath.relpath(copied[RUNTIME_LOCK], builder.last("WORKDIR").args),
    ]


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


def test_the_sdk_the_cli_calls_is_importable_beside_app(final: Stage) -> None:
    """`jobq stats`, `jobs`, `queues`, `schedules` and `worker` call the service through
    `jobq_client`: the image carries its package on PYTHONPATH (httpx is in the lock)."""
    copied = copied_paths(final)
    home = final.env()["PYTHONPATH"]
    assert copied["clients/python/src/jobq_client"] == f"{home}/jobq_client"
    assert (REPO / "clients/python/src/jobq_client/__init__.py").exists()


def test_healthcheck_probes_healthz_with_python(final: Stage) -> None:
    argv = healthcheck_argv(final)
    assert argv[:2] == ["python", "-c"]
    assert "/healthz" in argv[2]
    assert "127.0.0.1" in argv[2]
    assert "curl" not in final.last("HEALTHCHECK").args


def test_dockerignore_keeps_the_sources_and_drops_local_state() -> None:
    patterns = [
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    needed = [RUNTIME_LOCK, "alembic.ini", "app/py.typed", "alembic/script.py.mako"]
    needed += [
        str(p.relative_to(REPO))
        for d in ("app", "alembic", "clients/python/src/jobq_client")
        for p in (REPO / d).rglob("*.py")
    ]
    assert len(needed) > 10
    assert [path for path in needed if dockerignored(path, patterns)] == []
    for local in (
        ".venv", ".git", ".jobq", "app/__pycache__", ".mypy_cache", "node_modules",
        "clients/typescript", "clients/python/tests", "clients/python/src/jobq_client/__pycache__",
    ):  # fmt: skip
        assert dockerignored(local, patterns), f"{local} would be sent to the builder"


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
