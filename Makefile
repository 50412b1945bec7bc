# The two commands in the README. Each sets itself up: a .venv with jobq and its Python
# SDK installed (so `.venv/bin/jobq worker` runs after `make run`).
# Without JOBQ_DATABASE_URL both use an embedded PostgreSQL kept in .jobq/ (JOBQ_DATA_DIR).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The lock (docs/development.md, Dependencies): exact versions with their hashes, the
# service's own and, a superset at the same versions, the development set.
RUNTIME_LOCK := requirements/runtime.txt
DEV_LOCK := requirements/dev.txt

.PHONY: run test lint lock openapi docs docs-serve docs-tables schema bench screenshots ui-assets clean

run: $(VENV)/.installed
	$(BIN)/jobq serve

test: $(VENV)/.installed-dev
	$(BIN)/pytest

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check app tests alembic bench clients/python
	$(BIN)/ruff format --check app tests alembic bench clients/python
	$(BIN)/mypy
	$(BIN)/lint-imports

openapi: $(VENV)/.installed
	$(BIN)/jobq openapi

# The docs site (docs/, mkdocs.yml) into site/; CI builds it with --strict too.
docs: $(VENV)/.installed-dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: $(VENV)/.installed-dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8001

# The docs' parts generated from the code (the Security scope table).
docs-tables: $(VENV)/.installed-dev
	$(BIN)/python -m tests.docs_tables

# alembic/schema.sql: the schema as migrating an empty database leaves it (pg_dump, the
# newest on the machine), on JOBQ_DATABASE_URL's server or the embedded one. Run it with
# each new migration; tests/db/test_schema_file.py fails until it is.
schema: $(VENV)/.installed-dev
	$(BIN)/python -m tests.schema_dump

# The benchmark (bench/): its own jobq serve on a recreated jobq_bench database.
# Options: make bench BENCH_ARGS='--quick --json out.json'  (python -m bench --help)
bench: $(VENV)/.installed-dev
	$(BIN)/python -m bench $(BENCH_ARGS)

$(VENV)/.python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "jobq needs Python 3.11 or newer; set PYTHON=python3.X")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@touch $@

# Every version comes from the lock (--require-hashes); jobq and the SDK go on top without
# dependencies of their own, so nothing newer slips in.
$(VENV)/.installed: $(RUNTIME_LOCK) pyproject.toml clients/python/pyproject.toml $(VENV)/.python
	$(BIN)/python -m pip install --quiet --require-hashes -r $(RUNTIME_LOCK)
	$(BIN)/python -m pip install --quiet --no-deps -e . -e clients/python
	@touch $@

$(VENV)/.installed-dev: $(DEV_LOCK) pyproject.toml clients/python/pyproject.toml $(VENV)/.python
	$(BIN)/python -m pip install --quiet --require-hashes -r $(DEV_LOCK)
	$(BIN)/python -m pip install --quiet --no-deps -e . -e clients/python
	@touch $@ $(VENV)/.installed

# Re-resolves the lock from pyproject.toml's bounds with uv (from the lock itself), for
# Python 3.11 and up on every platform: the development set first, then the runtime set
# held to its versions. Current pins are kept unless LOCK_ARGS says otherwise:
#   make lock LOCK_ARGS=--upgrade                       every package to its newest
#   make lock LOCK_ARGS='--upgrade-package fastapi'     one package (and what it needs)
LOCK_COMPILE = $(BIN)/uv pip compile pyproject.toml --universal --python-version 3.11 \
	--generate-hashes --custom-compile-command 'make lock' --quiet $(LOCK_ARGS)
lock: $(VENV)/.installed-dev
	$(LOCK_COMPILE) --extra dev -o $(DEV_LOCK)
	$(LOCK_COMPILE) -c $(DEV_LOCK) -o $(RUNTIME_LOCK)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site

# The dashboard's pictures in docs/screenshots (Debian's Chromium: apt-get install chromium).
screenshots: $(VENV)/.installed-dev
	$(BIN)/python -m tests.processes.dashboard_screenshots

# Swagger UI's files for /docs, from npm, pinned (they ship in the package: no CDN).
SWAGGER_UI_VERSION = 5.35.0
ui-assets:
	rm -rf /tmp/jobq-swagger-ui && mkdir -p /tmp/jobq-swagger-ui
	cd /tmp/jobq-swagger-ui && npm pack --silent swagger-ui-dist@$(SWAGGER_UI_VERSION) \
		&& tar xzf swagger-ui-dist-$(SWAGGER_UI_VERSION).tgz
	cp /tmp/jobq-swagger-ui/package/swagger-ui-bundle.js /tmp/jobq-swagger-ui/package/swagger-ui.css \
		/tmp/jobq-swagger-ui/package/LICENSE app/ui/static/swagger/

