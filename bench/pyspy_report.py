#!/usr/bin/env python3
"""Function-level summary of a py-spy ``--format raw`` profile (collapsed stacks).

    python bench/pyspy_report.py profile.txt [--top 12] [--json]

Only the main (event-loop) thread's samples count (record with ``--threads``). For every function
(``name (file)``): *inclusive* is the share of samples whose stack contains it, *self* the share
where it is the innermost frame; ``EpollSelector.select`` as self time is the loop waiting for
I/O (profiles are recorded with ``--idle``). File paths are shortened to
the part after ``site-packages/`` or the repository root. Standard library frames are kept: time
in ``sqlite3`` or ``select`` matters as much as time in doemu.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

_FRAME = re.compile(r"^(?P<fn>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


_REPO = str(Path(__file__).resolve().parent.parent) + "/"


def _short(path: str) -> str:
    if "/bin/" in path:  # a console script such as .venv/bin/doemu
        return path.rsplit("/", 1)[-1]
    for marker in ("site-packages/", _REPO, "/lib/python3."):
        i = path.find(marker)
        if i >= 0:
            rest = path[i + len(marker) :]
            return rest.split("/", 1)[1] if marker == "/lib/python3." and "/" in rest else rest
    return path


def _source(file: str, lineno: int) -> str:
    try:
        lines = Path(file).read_text().splitlines()
    except OSError:
        return ""
    return lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""


def _label(frame: str) -> str:
    m = _FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    return f"{m.group('fn')} ({_short(m.group('file'))})"


# The launcher, the CLI entry and the event loop's own frames sit under everything the server does:
# they say nothing about where the time goes. (A sample taken inside an asyncio task starts at the
# task's coroutine: py-spy does not see through the C task step, so these frames are undercounted
# anyway.) In a start-up profile the modules the launcher imports (``<module> (doemu/…)``) are
# the point, so those stay unless they hold nearly every sample.
_LOOP_CHAIN = (
    "<module> (doemu)",
    "Handle._run (asyncio/events.py)",
    "dev (doemu/cli.py)",
    "run (asyncio/runners.py)",
    "Runner.run (asyncio/runners.py)",
    "BaseEventLoop.run_until_complete (",
    "BaseEventLoop.run_forever (",
    "BaseEventLoop._run_once (",
)


def _boring(label: str, count: int, total: int) -> bool:
    if count >= total or "(click/" in label or "<frozen importlib" in label:
        return True
    if label.startswith(_LOOP_CHAIN):
        return True
    return label.startswith("<module> (doemu") and count >= 0.9 * total


def summarize(path: Path, top: int = 12) -> dict[str, Any]:
    """Digest of the main (event-loop) thread's samples; other threads are counted apart."""
    total = other = 0
    inclusive: Counter[str] = Counter()
    self_time: Counter[str] = Counter()
    self_lines: Counter[tuple[str, str, int]] = Counter()  # (function, file, line)
    waiting = 0
    parsed: list[tuple[str | None, list[str], int]] = []
    main_ids: set[str] = set()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        raw = [f for f in stack.split(";") if f and not f.startswith("process ")]
        tid = None
        if raw and raw[0].startswith("thread ("):
            head, raw = raw[0], raw[1:]
            tid = head[len("thread (") :].split(")", 1)[0]
            # py-spy names the thread only once ``threading`` knows it; the main thread is also
            # the one whose stacks start at the launcher module
            if "MainThread" in head or (raw and raw[0].startswith("<module> (")):
                main_ids.add(tid)
        parsed.append((tid, raw, int(count)))
    for tid, raw, n in parsed:
        if tid is not None and tid not in main_ids:
            other += n
            continue
        frames = [_label(f) for f in raw]
        if not frames:
            continue
        total += n
        for label in set(frames):
            inclusive[label] += n
        self_time[frames[-1]] += n
        m = _FRAME.match(raw[-1].strip())
        if m and m.group("line"):
            self_lines[(frames[-1], m.group("file"), int(m.group("line")))] += n
        if frames[-1].startswith(("EpollSelector.select (", "select (", "poll (")):
            waiting += n

    def table(counter: Counter[str]) -> list[dict[str, Any]]:
        rows = [(k, v) for k, v in counter.most_common() if not _boring(k, v, total)]
        return [
            {"function": k, "pct": round(100 * v / total, 1), "samples": v} for k, v in rows[:top]
        ]

    # where, line by line, the two largest self-time functions of the project itself spend it
    hot_lines = []
    own = [k for k, _ in self_time.most_common() if "(doemu/" in k or "(agents/" in k][:2]
    for fn in own:
        for (label, file, lineno), v in self_lines.most_common():
            if label == fn and v >= 0.02 * total:
                hot_lines.append({"function": fn, "line": lineno, "source": _source(file, lineno),
                                  "pct": round(100 * v / total, 1)})  # fmt: skip
    return {
        "samples": total,
        "inclusive": table(inclusive),
        "self": table(self_time),
        "hot_lines": hot_lines[:8],
        "event_loop_waiting_pct": round(100 * waiting / total, 1) if total else None,
        "other_threads_samples": other,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("profile", type=Path)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    res = summarize(args.profile, args.top)
    if args.json:
        sys.stdout.write(json.dumps(res, indent=1) + "\n")
        return
    lines = [f"{res['samples']} samples, loop waiting {res['event_loop_waiting_pct']} %"]
    for kind in ("inclusive", "self"):
        lines.append(f"-- {kind}")
        lines += [f"{r['pct']:5.1f}%  {r['function']}" for r in res[kind]]
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
