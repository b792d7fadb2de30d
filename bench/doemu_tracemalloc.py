"""Profiling launcher: ``doemu dev`` with tracemalloc on; SIGUSR1 writes the allocation sites.

Used only by bench/profile_misses.py for the RSS row. It changes nothing in doemu: it starts
tracemalloc before doemu is imported and installs a SIGUSR1 handler that writes, to the file
named by ``DOEMU_BENCH_TRACEMALLOC_OUT``, the traced total and the 60 largest allocation sites
(grouped by file and line).

    DOEMU_BENCH_TRACEMALLOC_OUT=/tmp/t.json .venv/bin/python bench/doemu_tracemalloc.py dev ...
"""

import json
import os
import signal
import sys
import tracemalloc

tracemalloc.start(1)


def _dump(signum: int, frame: object) -> None:
    snap = tracemalloc.take_snapshot()
    stats = snap.statistics("lineno")
    sites = []
    for s in stats[:60]:
        f = s.traceback[0]
        name = f.filename
        for marker in ("site-packages/", "/work/main/"):
            if marker in name:
                name = name.split(marker, 1)[1]
        sites.append({"site": f"{name}:{f.lineno}", "kb": round(s.size / 1024, 1)})
    traced, _peak = tracemalloc.get_traced_memory()
    path = os.environ["DOEMU_BENCH_TRACEMALLOC_OUT"]
    with open(path + ".tmp", "w") as fh:
        json.dump({"traced_kb": round(traced / 1024, 1), "sites": sites}, fh)
    os.replace(path + ".tmp", path)


signal.signal(signal.SIGUSR1, _dump)

from doemu.cli import main  # noqa: E402

sys.exit(main())
