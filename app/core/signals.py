"""Hear a shutdown signal early, before the server stops waiting for requests in flight."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

SHUTDOWN_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextlib.contextmanager
def on_shutdown_signal(callback: Callable[[], None]) -> Iterator[None]:
    """Call `callback` on SIGTERM/SIGINT, then whatever handled the signal before.

    Entered during the app's startup, "before" is the server's own handler (uvicorn's,
    in every worker process), which then shuts down as usual. Handlers are restored on
    exit. Outside the main thread, signals cannot be handled: it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {sig: signal.getsignal(sig) for sig in SHUTDOWN_SIGNALS}

    def handler(sig: int, frame: FrameType | None) -> None:
        callback()
        before = previous[sig]
        if callable(before):
            before(sig, frame)
        elif before == signal.SIG_DFL:
            signal.signal(sig, signal.SIG_DFL)
            signal.raise_signal(sig)

    for sig in SHUTDOWN_SIGNALS:
        signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig in SHUTDOWN_SIGNALS:
            if signal.getsignal(sig) is handler:
                signal.signal(sig, previous[sig])
