"""The Python SDK as users get it: `python -m build` makes its wheel and sdist, and the
wheel installed into a fresh virtualenv imports, is typed, and runs a handler."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

from tests.helpers import exclusive

REPO = Path(__file__).resolve().parents[2]
SDK = REPO / "clients" / "python"

SMOKE = textwrap.dedent(
    """
    import jobq_client
    from jobq_client import Client, Job, Worker
    from jobq_client.testing import run

    worker = Worker(queues=["q"])

    @worker.handler("double")
    async def double(job: Job) -> int:
        await job.progress(50)
        return job.payload * 2

    outcome = run(worker, "double", 21)
    assert outcome.result == 42 and outcome.progress == [(50, None, None)], outcome
    assert Client("http://127.0.0.1:1").base_url == "http://127.0.0.1:1"
    print("ok", jobq_client.__version__, jobq_client.__file__)
    """
)


@pytest.mark.once("embedded")  # the server run has the benchmark's soak and lint
def test_the_wheel_installs_in_a_fresh_venv_and_works(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    with exclusive(SDK):  # the build writes its egg-info into the source tree
        built = subprocess.run(
            [sys.executable, "-m", "build", "--wheel", "--sdist", "--outdir", str(dist), str(SDK)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = dist.glob("jobq_client-*.whl")
    (sdist,) = dist.glob("jobq_client-*.tar.gz")
    names = zipfile.ZipFile(wheel).namelist()
    assert "jobq_client/py.typed" in names and "jobq_client/testing.py" in names
    with tarfile.open(sdist) as archive:
        assert any(n.endswith("README.md") for n in archive.getnames())

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    smoke = subprocess.run(
        [str(python), "-c", SMOKE], capture_output=True, text=True, timeout=60, check=False,
        cwd=tmp_path,  # not the repository: the installed package, not the source tree
    )  # fmt: skip
    assert smoke.returncode == 0, smoke.stderr[-3000:]
    assert smoke.stdout.startswith("ok 0.1.0") and str(env_dir) in smoke.stdout
