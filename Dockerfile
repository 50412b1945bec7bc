# jobq: a PostgreSQL-backed job queue served over HTTP.
#
#   docker build -t jobq .
#   docker run -e JOBQ_DATABASE_URL=postgresql://user:pass@host:5432/db -p 8000:8000 jobq
#
# The entrypoint is the `jobq` command (`python -m app`): `serve` (the default),
# `migrate`, `openapi -o -`. docker-compose.yml runs PostgreSQL, `migrate`, then `serve`.
# Without JOBQ_DATABASE_URL the service starts an embedded PostgreSQL in the
# /var/lib/jobq volume (fine to try it out; use a real server in production).

# Both stages must use the same base: the venv's interpreter is a symlink into it.
FROM python:3.12-slim-bookworm AS builder

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

# The runtime lock (`make lock`): the exact versions CI tested, each file checked against
# its hash, none of the dev tools. jobq itself is not installed (its code is copied to
# /srv/jobq below), so this layer stays cached until the lock changes.
WORKDIR /build
COPY requirements/runtime.txt ./requirements.txt
RUN pip install --require-hashes -r requirements.txt


FROM python:3.12-slim-bookworm

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONPATH=/srv/jobq \
    JOBQ_HOST=0.0.0.0 \
    JOBQ_PORT=8000 \
    JOBQ_DATA_DIR=/var/lib/jobq

# A fixed numeric uid/gid, so volumes and `runAsNonRoot` policies can rely on it.
RUN groupadd --system --gid 10001 jobq \
    && useradd --system --uid 10001 --gid jobq --home-dir /var/lib/jobq --no-create-home \
        --shell /usr/sbin/nologin jobq \
    && install -d -o jobq -g jobq -m 0750 /var/lib/jobq

COPY --from=builder /opt/venv /opt/venv

# app/db/migrate.py finds the migrations at <dir holding app/>/alembic, so app/ and
# alembic/ are siblings. The code stays owned by root: the service cannot rewrite it.
WORKDIR /srv/jobq
COPY alembic.ini ./alembic.ini
COPY alembic/ ./alembic/
COPY app/ ./app/
# The operator commands (`jobq stats`, `jobs`, `queues`, `schedules`, `worker`) call the
# service through the Python SDK: its package sits beside app/ on PYTHONPATH, as app/
# does, and its one dependency (httpx) is in the runtime lock.
COPY clients/python/src/jobq_client/ ./jobq_client/
RUN python -m compileall -q app alembic jobq_client

USER 10001:10001
VOLUME ["/var/lib/jobq"]
EXPOSE 8000

# No curl in slim images; urlopen raises (exit 1) on refusal, timeout or a non-2xx reply.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('JOBQ_PORT', '8000') + '/healthz', timeout=4)"]

ENTRYPOINT ["python", "-m", "app"]
CMD ["serve"]
