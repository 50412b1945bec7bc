"""jobq's benchmark: `python -m bench` (or `make bench`); see `python -m bench --help`.

It starts its own `jobq serve` against a dedicated database (`jobq_bench`, dropped and
recreated first), drives it over HTTP from separate load-generator processes, runs the
bare `SKIP LOCKED` claim loop on asyncpg as the reference for what the database allows,
and reports throughput, latency and CPU per job as a table and as JSON.
"""
