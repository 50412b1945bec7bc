"""`jobq serve` freezes what its start-up made out of the garbage collector's reach."""

from __future__ import annotations

import gc
import weakref

from fastapi import FastAPI

from app.cli.serve import frozen


class _Node:
    other: _Node | None = None


def test_the_start_ups_garbage_is_collected_then_the_rest_frozen() -> None:
    gc.unfreeze()
    garbage = _Node()
    garbage.other = garbage  # a cycle: only the collector frees it
    gone = weakref.ref(garbage)
    del garbage
    app = FastAPI()
    try:
        assert frozen(app) is app
        assert gone() is None  # collected, not frozen (never to be collected)
        assert gc.get_freeze_count() > 1000  # the modules and the app
    finally:
        gc.unfreeze()  # this test process goes on collecting as before
