"""The garbage collector of a serving worker (issue 31, round 3).

CPython collects its youngest generation each time 700 more tracked objects (dicts, lists, the
SDK's models) were made than freed; a `bash` call's leftovers got there about every fourth call,
and each collection walked what survived into the older generations, where the catalog, the live
shells and the imported modules sit. Once the worker listens: what startup made is frozen out of
every later collection (`gc.freeze`, after one last collection so startup's garbage is not kept),
and the youngest generation is collected at `YOUNG_THRESHOLD`. Measured with `gc.callbacks` over
2,000 calls of issue 31's script: about 0.15 ms of collecting a call less (benchmarks/README.md).
Cycles are still collected, later; nothing else changes. It is the process's collector: `serve`
is a process of its own (uvicorn takes the process's signals too).
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000


def settle() -> None:
    """Freeze what the worker made while starting, and collect young objects less often."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
