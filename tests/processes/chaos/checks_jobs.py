"""Invariants of the jobs: every acknowledged enqueue is there once, finished as scripted,
with a history that adds up."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from tests.processes.chaos import (
    KIND_WEIGHTS,
    QUEUE,
    Script,
    job_key,
    key_index,
    plan_outcome,
)
from tests.processes.chaos.evidence import Job, lease_uuid
from tests.processes.chaos.options import EXAMPLES
from tests.processes.chaos.verdict import CheckBase


class JobChecks(CheckBase):
    """The producers' answers, the jobs' final states and their histories."""

    # ---- producers: every acknowledged enqueue is there, once --------------------------

    def producers(self) -> dict[str, Any]:
        opts, v = self.opts, self.v
        expected = {job_key(opts.run, i) for i in range(opts.jobs)}
        ids_by_key: dict[str, set[int]] = defaultdict(set)
        answers: Counter[str] = Counter()
        deduplicated = 0
        for record in self.ev.enqueued:
            if record["key"] in self.run.stale_keys:
                continue
            ids_by_key[record["key"]].add(record["id"])
            answers[str(record["status"])] += 1
            deduplicated += bool(record["dedup"])
        for key in sorted(expected - ids_by_key.keys())[:EXAMPLES]:
            v.fail("enqueue never acknowledged", key)
        keys_of_id: dict[int, set[str]] = defaultdict(set)
        for key, ids in ids_by_key.items():
            if key not in expected:
                v.fail("acknowledged a key nobody sent", key)
            if len(ids) > 1:
                v.fail("one key answered with several jobs", f"{key}: {sorted(ids)}")
            for job_id in ids:
                keys_of_id[job_id].add(key)
        for job_id, keys in keys_of_id.items():
            if len(keys) > 1:
                v.fail("one job answered for several keys", f"job {job_id}: {sorted(keys)}")
        in_db = [job for job in self.jobs.values() if job.queue == QUEUE]
        jobs_of_key: dict[str | None, list[Job]] = defaultdict(list)
        for job in in_db:
            jobs_of_key[job.key].append(job)
        for job_key_, same in jobs_of_key.items():
            if len(same) > 1:
                first, second = same[0], same[1]
                why = (
                    "made after the first had finished, which still held its key"
                    if first.finished is not None and first.finished < second.created
                    else "made while the first was unfinished"
                )
                v.fail(
                    "second job for one idempotency key",
                    f"{job_key_}: jobs {[j.id for j in same]} ({why})",
                )
            if job_key_ not in expected:
                v.fail("job in the database nobody enqueued", f"{job_key_}: {[j.id for j in same]}")
        if len(in_db) != opts.jobs:
            v.fail("final count", f"{len(in_db)} jobs in the database, {opts.jobs} enqueued")
        lost = 0
        for key, ids in sorted(ids_by_key.items()):
            for job_id in ids:
                found = self.jobs.get(job_id)
                if found is None or found.key != key:
                    lost += 1
                    v.fail("acknowledged enqueue lost", f"{key} → job {job_id}")
                    continue
                index = key_index(key)
                if found.payload != Script.for_index(opts.seed, index).payload(index):
                    v.fail("payload differs from what was enqueued", f"job {job_id}")
        return {
            "keys": len(expected),
            "acknowledged": len(ids_by_key),
            "jobs_in_db": len(in_db),
            "answers": dict(sorted(answers.items())),
            "deduplicated_answers": deduplicated,
            "lost": lost,
        }

    # ---- every job finished as its script says, with a consistent history ------------

    def final_states(self) -> dict[str, Any]:
        v = self.v
        states: Counter[str] = Counter()
        kinds: Counter[str] = Counter()
        unfinished = 0
        for job in self.jobs.values():
            script = job.script
            states[job.state] += 1
            kinds[script.kind] += 1
            if job.state not in ("succeeded", "failed"):
                unfinished += 1
                v.fail("job not finished", f"job {job.id} ({script.kind}) is {job.state}")
                continue
            if job.state != script.final_state:
                v.fail(
                    "job ended in another state than its script's",
                    f"job {job.id} ({script.kind}) {job.state}",
                )
            self.history(job, script)
        for kind in KIND_WEIGHTS.keys() - kinds.keys():
            v.fail("a kind of job was never enqueued", kind)
        return {
            "total": len(self.jobs),
            "states": dict(sorted(states.items())),
            "kinds": dict(sorted(kinds.items())),
            "unfinished": unfinished,
        }

    def history(self, job: Job, script: Script) -> None:
        v = self.v
        numbers = [a.attempt for a in job.attempts]
        if numbers != list(range(1, job.attempt + 1)):
            v.fail(
                "attempt history has gaps",
                f"job {job.id}: attempt {job.attempt}, records {numbers}",
            )
        if len({a.lease for a in job.attempts}) != len(job.attempts):
            v.fail("one lease recorded twice", f"job {job.id}")
        succeeded = [a for a in job.attempts if a.outcome == "succeeded"]
        if len(succeeded) > 1:
            v.fail(
                "job succeeded twice", f"job {job.id}: attempts {[a.attempt for a in succeeded]}"
            )
        for record in job.attempts:
            planned = script.plan(record.attempt)
            if record.outcome != "lease_expired" and plan_outcome(planned) != record.outcome:
                v.fail(
                    "recorded outcome differs from the script",
                    f"job {job.id} attempt {record.attempt}: {record.outcome}, script {planned}",
                )
        for record in job.attempts[:-1]:
            final = record.outcome == "failed" and script.plan(record.attempt) == "fatal"
            if record.outcome == "succeeded" or final:
                v.fail(
                    "job went on after a final outcome", f"job {job.id} attempt {record.attempt}"
                )
        last = job.attempts[-1] if job.attempts else None
        if job.state == "succeeded" and (last is None or last.outcome != "succeeded"):
            v.fail("succeeded job whose last attempt did not succeed", f"job {job.id}")
        if job.state == "succeeded" and job.queue == QUEUE and last is not None:
            token = (job.result or {}).get("lease")
            if token is None or lease_uuid(token) != last.lease:
                v.fail("result stored by another lease than the successful one", f"job {job.id}")

    # ---- executions: every one accounted for by a lease, every waste explained -----------
