"""`python -m app` is the `jobq` command."""

from app.cli import main

main()
