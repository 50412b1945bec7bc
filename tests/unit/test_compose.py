"""`docker-compose.yml`, read as YAML: PostgreSQL healthchecked, migrations once before the
service, every variable a real setting, and every dependency one that can be met."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import make_url

from app.db.url import async_url
from tests.container_files import (
    COMPOSE_FILE,
    DOCKERFILE,
    ENV_PREFIX,
    SDK_ENV_NAMES,
    Stage,
    assert_valid_settings,
    build_dir,
    depends_on,
    environment,
    jobq_subcommands,
    parse_dockerfile,
    runs_the_sdk,
)


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
