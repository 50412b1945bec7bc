"""The benchmark's command line: what it accepts, what it refuses, and its help."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.options import QUICK, SCENARIOS, Config, config_from, parser
from bench.run import STEPS

REPO = Path(__file__).resolve().parents[2]


def _config(*args: str) -> Config:
    return config_from(parser().parse_args(list(args)))


def test_every_scenario_named_on_the_command_line_has_a_step() -> None:
    assert tuple(STEPS) == SCENARIOS


def test_the_defaults_run_every_scenario_but_fair_prune_and_the_soak() -> None:
    config = _config()
    assert config == Config()
    assert config.scenarios == ["drain", "limited", "single", "latency", "floor"]
    assert config.service_env == {}


def test_the_prune_runs_when_named_and_the_service_then_keeps_finished_jobs() -> None:
    config = _config("--only", "prune", "--prune-rows", "5000")
    assert (config.scenarios, config.prune_rows) == (["prune"], 5000)
    assert config.service_env["JOBQ_RETAIN_SUCCEEDED_SECONDS"] == "0"  # its pruner idles


def test_quick_is_small_and_explicit_options_still_apply() -> None:
    config = _config("--quick", "--jobs", "3000", "--only", "floor,drain")
    assert config.quick and config.jobs == 3000
    assert config.floor_rounds == QUICK["floor_rounds"] == 1
    assert config.scenarios == ["drain", "floor"]  # in the run's order


def test_a_soak_length_runs_the_soak_alone_unless_more_are_named() -> None:
    assert _config("--soak", "5").scenarios == ["soak"]
    assert _config("--soak", "5", "--only", "drain").scenarios == ["drain", "soak"]
    with pytest.raises(SystemExit, match="the soak needs its length"):
        _config("--only", "soak")


def test_service_env_and_warm_up() -> None:
    config = _config("--service-env", "JOBQ_A=1", "--service-env", "JOBQ_B=x=y", "--no-warmup")
    assert config.service_env == {"JOBQ_A": "1", "JOBQ_B": "x=y"}
    assert config.warmup is False


@pytest.mark.parametrize(
    ("args", "refused"),
    [
        (("--only", "bare"), "choose from drain, limited, single, latency, floor, fair, prune"),
        (("--workers", "0"), "must be at least 1"),
        (("--service-env", "JOBQ_A"), "expected NAME=VALUE"),
    ],
)
def test_what_it_does_not_know_is_refused(
    args: tuple[str, ...], refused: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(list(args))
    assert exited.value.code == 2
    assert refused in capsys.readouterr().err


def test_the_help_fits_80_columns() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "bench", "--help"],
        cwd=REPO,
        env={**os.environ, "COLUMNS": "80"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "--floor-rounds" in run.stdout
    assert max(len(line) for line in run.stdout.splitlines()) <= 80, run.stdout
