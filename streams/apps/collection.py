"""How a worker's garbage collector runs: less often than CPython's default."""

from __future__ import annotations

import gc

# A worker holds tens of thousands of long-lived objects (snapshot rows, caches, the model's
# Python side) and allocates thousands of short-lived ones per message or request. With
# CPython's default thresholds (700, 10, 10) it collects every few hundred allocations and
# walks every long-lived object every few requests: a quarter of a k = 100 query's mean
# time (see docs/decisions.md#workers-collect-garbage-less-often). Garbage without cycles is
# still freed at once by reference counting.
GC_THRESHOLDS = (50_000, 20, 20)


def collect_as_a_worker() -> None:
    """This process's collector thresholds set to a worker's (`GC_THRESHOLDS`): the benches
    that time the query service in their own process call it too."""
    gc.set_threshold(*GC_THRESHOLDS)
