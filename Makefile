# The two commands in the README. Each sets itself up: a .venv with jobq and its Python
# SDK installed (so `.venv/bin/jobq worker` runs after `make run`).
# Without JOBQ_DATABASE_URL both use an embedded PostgreSQL kept in .jobq/ (JOBQ_DATA_DIR).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test lint openapi docs docs-serve docs-tables bench screenshots ui-assets clean

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

# The benchmark (bench/): its own jobq serve on a recreated jobq_bench database.
# Options: make bench BENCH_ARGS='--quick --json out.json'  (python -m bench --help)
bench: $(VENV)/.installed-dev
	$(BIN)/python -m bench $(BENCH_ARGS)

$(VENV)/.python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "jobq needs Python 3.11 or newer; set PYTHON=python3.X")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@touch $@

$(VENV)/.installed: pyproject.toml clients/python/pyproject.toml $(VENV)/.python
	$(BIN)/python -m pip install --quiet -e . -e clients/python
	@touch $@

$(VENV)/.installed-dev: pyproject.toml clients/python/pyproject.toml $(VENV)/.python
	$(BIN)/python -m pip install --quiet -e '.[dev]' -e clients/python
	@touch $@ $(VENV)/.installed

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

