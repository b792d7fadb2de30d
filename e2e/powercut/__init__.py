"""Power cuts for end-to-end tests: a process loses what it never synced, as after a power loss.

A SIGKILL cannot tell ``--durability power`` from ``process``: the kernel keeps every write the
process made, synced or not. A power loss (or an OS crash) keeps only what reached the disk,
and a program learns that its data reached the disk only from ``fsync``/``fdatasync`` returning.
This module models exactly that:

* :func:`build_shim` compiles ``shim.c`` (with the system's C compiler; cached by the source's
  hash) into a library that a ``doemu dev`` process loads with ``LD_PRELOAD``. Every ``fsync``
  or ``fdatasync`` on a file or directory under the persist dir first copies what the call makes
  durable into a shadow directory: a file's content (keyed by the file's identity, so a rename
  does not change it), or a directory's entries (names and the identity of each). Python's
  ``os.fsync`` and SQLite both call these through libc, so both are seen; ``sync``, ``syncfs``
  and ``sync_file_range`` are logged as unmodelled.
* :meth:`PowerCut.cut`, after the process group was SIGKILLed, rebuilds the persist dir from the
  shadow alone, starting from the persist dir's last synced entries: a file whose directory
  entry was never synced is gone, a synced one has the content of its last sync (an entry
  synced without its content is an empty file), a directory never synced is empty. The tree as
  the killed process left it is kept next to it (``<persist>.lost``) for a failing test's
  post-mortem.

The model is the strict one POSIX promises (ext4's ordered mode often keeps more): the test
using it proves that nothing doemu acknowledged depends on luck. The persist dir must be empty
when the server starts (its empty state is the durable baseline).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SHIM_SOURCE", "CutReport", "PowerCut", "build_shim", "compiler"]

SHIM_SOURCE = Path(__file__).with_name("shim.c")


def compiler() -> str | None:
    """The system's C compiler (``cc``, else ``gcc``), or None."""
    return shutil.which("cc") or shutil.which("gcc")


def build_shim(cache_dir: Path) -> Path:
    """The shim compiled into ``cache_dir`` (once per source version)."""
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler (cc or gcc) to build the power-cut shim")
    source = SHIM_SOURCE.read_bytes()
    out = cache_dir / f"powercut-{hashlib.sha256(source).hexdigest()[:12]}.so"
    if not out.exists():
        partial = out.with_suffix(f".{os.getpid()}.tmp")
        flags = ["-shared", "-fPIC", "-O2", "-Wall", "-ldl", "-lpthread"]
        built = subprocess.run(
            [cc, *flags[:4], "-o", str(partial), str(SHIM_SOURCE), *flags[4:]],
            capture_output=True,
            text=True,
            check=False,
        )
        if built.returncode != 0:
            raise RuntimeError(f"building the power-cut shim failed:\n{built.stderr}")
        partial.replace(out)
    return out


@dataclass
class CutReport:
    """What a cut kept and lost, by path relative to the persist dir."""

    kept: list[str] = field(default_factory=list)
    emptied: list[str] = field(default_factory=list)  # entry synced, content never
    lost: list[str] = field(default_factory=list)  # present before the cut, gone after


@dataclass
class PowerCut:
    """The shim's view of one persist dir: the environment to start a server with, the syncs
    it saw, and the cut."""

    shim: Path
    root: Path
    shadow: Path

    def __post_init__(self) -> None:
        self.root = self.root.resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        if any(self.root.iterdir()):
            raise ValueError(f"{self.root} must be empty: its empty state is the baseline")
        self.shadow.mkdir(parents=True, exist_ok=True)

    def env(self) -> dict[str, str]:
        """Environment variables that load the shim into a process and aim it at the root."""
        preload = " ".join(filter(None, [str(self.shim), os.environ.get("LD_PRELOAD")]))
        return {
            "LD_PRELOAD": preload,
            "POWERCUT_ROOT": str(self.root),
            "POWERCUT_SHADOW": str(self.shadow.resolve()),
        }

    def syncs(self) -> list[tuple[str, str]]:
        """Every intercepted call so far: ``(fsync|fdatasync|unmodelled, path or call)``."""
        log = self.shadow / "log"
        if not log.exists():
            return []
        calls = []
        for line in log.read_text().splitlines():
            what, _, path = line.partition(" ")
            calls.append((what, path))
        return calls

    def cut(self) -> CutReport:
        """Replace the persist dir by what was durable. The process must be dead already."""
        lost = self.root.with_name(self.root.name + ".lost")
        self.root.rename(lost)
        report = CutReport()
        self._build(self.root, self.shadow / "droot", report, "")
        before = {str(p.relative_to(lost)) for p in lost.rglob("*") if p.is_file()}
        report.lost = sorted(before - set(report.kept) - set(report.emptied))
        return report

    def _build(self, dest: Path, manifest: Path, report: CutReport, prefix: str) -> None:
        dest.mkdir()
        if not manifest.exists():
            return  # a directory whose entries were never synced: empty
        for line in manifest.read_text().splitlines():
            kind, key, name = line.split(" ", 2)
            target, rel = dest / name, f"{prefix}{name}"
            if kind == "d":
                self._build(target, self.shadow / f"d{key}", report, f"{rel}/")
                continue
            content = self.shadow / f"f{key}"
            if content.exists():
                shutil.copyfile(content, target)
                report.kept.append(rel)
            else:
                target.touch()
                report.emptied.append(rel)
