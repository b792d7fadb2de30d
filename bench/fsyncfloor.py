#!/usr/bin/env python3
"""The disk's own limit for durable writes on the persist dirs' file system (physical-limit rows).

    python bench/fsyncfloor.py --dir "$WORK/floor-1" --duration 3 --out results/floor-1.json

A power-durable ``incr`` on one object at c=1 can go no faster than one durable write after
another: the bare loop here is that write without anything else, a 4,120-byte ``pwrite`` (one
WAL frame: a 24-byte header and a 4 KiB page, what a one-row commit appends) followed by
``fdatasync`` (what SQLite and doemu use for a WAL), on one file that is rewritten in place, as a
WAL is between checkpoints. ``BENCHMARKS.md`` shows each server's incr c=1 as a fraction of it,
measured in the same round.

The parallel rate is the same loop on 32 files at once, one thread each (the incr-over-1,000
objects row keeps up to 32 objects' fsyncs in flight): how many durable writes per second the
disk takes when they overlap. Also recorded: the single loop with ``fsync`` instead, which
updates the file's modification time and so commits the file system's journal each time.

``run.sh`` runs it right before and right after phase b's servers in every round and then
``--merge`` puts the mean of the two into each server's results of that round (``floor``), with
``floor_fraction``: incr c=1 over the single loop, incr over 1,000 objects c=32 over the
parallel one.

Standard library only; every loop is bounded by ``--duration``. The files are removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

FRAME = 4120
SLOTS = 64  # the file holds 64 frames; the loop rewrites them in turn


def _file(directory: Path, name: str) -> int:
    fd = os.open(directory / name, os.O_RDWR | os.O_CREAT, 0o644)
    os.pwrite(fd, b"\0" * FRAME * SLOTS, 0)
    os.fsync(fd)
    return fd


def loop(
    directory: Path, threads: int, duration: float, sync: Callable[[int], None]
) -> dict[str, float]:
    """``threads`` files, one writer each, for ``duration`` seconds: durable writes per second."""
    fds = [_file(directory, f"floor-{threads}-{i}") for i in range(threads)]
    counts = [0] * threads
    frame = os.urandom(FRAME)
    start = time.perf_counter()
    stop = start + duration

    def work(i: int) -> None:
        fd, n = fds[i], 0
        while time.perf_counter() < stop:
            os.pwrite(fd, frame, (n % SLOTS) * FRAME)
            sync(fd)
            n += 1
        counts[i] = n

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - start
    for fd in fds:
        os.close(fd)
    total = sum(counts)
    return {"threads": threads, "writes": total, "elapsed_s": elapsed, "per_s": total / elapsed}


def merge(floors: list[Path], into: list[Path]) -> None:
    """The mean of ``floors`` (runs of this script) as ``floor`` in each load.py result of
    ``into``, with that server's incr rows as ``floor_fraction`` of it."""
    runs = [json.loads(f.read_text()) for f in floors if f.exists()]
    if not runs:
        return
    floor = {
        key: sum(r[key]["per_s"] for r in runs) / len(runs)
        for key in ("fdatasync_c1", "fdatasync_parallel", "fsync_c1")
    }
    floor["parallel_threads"] = runs[0]["fdatasync_parallel"]["threads"]
    floor["runs"] = [
        {k: r[k]["per_s"] for k in ("fdatasync_c1", "fdatasync_parallel")} for r in runs
    ]
    for path in into:
        if not path.exists():
            continue
        result = json.loads(path.read_text())
        c1 = (result.get("incr_one_c1") or {}).get("rps")
        spread = (result.get("incr_spread_c32") or {}).get("rps")
        result["floor"] = floor
        result["floor_fraction"] = {
            "incr_c1": c1 / floor["fdatasync_c1"] if c1 else None,
            "incr_spread": spread / floor["fdatasync_parallel"] if spread else None,
        }
        path.write_text(json.dumps(result, indent=2) + "\n")


def main() -> None:
    if sys.argv[1:2] == ["--merge"]:  # --merge FLOOR... -- RESULT...
        rest = sys.argv[2:]
        cut = rest.index("--")
        merge([Path(p) for p in rest[:cut]], [Path(p) for p in rest[cut + 1 :]])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dir", required=True, help="a scratch dir on the persist dirs' file system")
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per loop")
    ap.add_argument("--parallel", type=int, default=32, help="files (threads) in the parallel loop")
    ap.add_argument("--out", help="write the JSON here too")
    args = ap.parse_args()
    directory = Path(args.dir)
    directory.mkdir(parents=True, exist_ok=True)
    try:
        result = {
            "fdatasync_c1": loop(directory, 1, args.duration, os.fdatasync),
            "fdatasync_parallel": loop(directory, args.parallel, args.duration, os.fdatasync),
            "fsync_c1": loop(directory, 1, args.duration, os.fsync),
            "dir": str(directory),
            "frame_bytes": FRAME,
        }
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    text = json.dumps(result, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n")
    sys.stdout.write(text + "\n")
    sys.stderr.write(
        f"floor: write+fdatasync {result['fdatasync_c1']['per_s']:.0f}/s at c=1, "
        f"{result['fdatasync_parallel']['per_s']:.0f}/s on {args.parallel} files; "
        f"write+fsync {result['fsync_c1']['per_s']:.0f}/s\n"
    )


if __name__ == "__main__":
    main()
