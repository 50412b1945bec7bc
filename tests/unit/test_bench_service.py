"""The benchmark's service: what it shows of the service's log when a load fails."""

from __future__ import annotations

from pathlib import Path

from bench.service import Service


def _service(log: Path) -> Service:
    return Service("postgresql://postgres@127.0.0.1/unused", workers=1, log_path=log)


def test_the_tail_comes_after_the_errors_logged_above_it(tmp_path: Path) -> None:
    log = tmp_path / "service.log"
    lines = [f'{{"level":"info","message":"line {n}"}}' for n in range(100)]
    lines[5] = '{"level":"error","message":"unhandled error on POST /v1/leases"}'
    lines[7] = "2026-11-27 19:08:24,001 ERROR jobq.api: unhandled error"
    log.write_text("\n".join(lines) + "\n")
    shown = _service(log).log_tail(3).splitlines()
    assert shown == [
        "(errors above the tail)",
        lines[5],
        lines[7],
        "(the tail)",
        *lines[-3:],
    ]
    lines[5] = lines[7] = '{"level":"info","message":"quiet"}'
    log.write_text("\n".join(lines) + "\n")
    assert _service(log).log_tail(3).splitlines() == lines[-3:]  # no errors: the tail alone
    assert _service(tmp_path / "absent.log").log_tail() == ""
