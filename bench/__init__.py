"""jobq's benchmark: `python -m bench` (or `make bench`); see `python -m bench --help`.

It starts its own `jobq serve` against a dedicated database (`jobq_bench`, dropped and
recreated first), drives it over HTTP from separate load-generator processes, runs the
framework floor (`bench.floor`: FastAPI and one bare statement per call) back to back
with it as the reference for what the HTTP stack allows, and reports throughput,
latency and CPU per job against the targets, as a table and as JSON.

Its parts: `options` (the command line), `run` (one run, end to end), `scenarios`
(jobq's loads), `references` (the floor's rounds), `soak`, `report` (the targets and
the tables); `load`, `generators`, `http_loads` and `soak_load` drive the load from
processes of their own; `service`, `database` and `cpu` start, prepare and meter.
"""
