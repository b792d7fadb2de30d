"""Finding and preparing pyworkerd: real workerd that runs Python Workers offline.

pyworkerd is a folder of scripts (kept outside this repository, beside it in ``../shared``) whose
``setup.sh HOME`` installs a pinned workerd, builds the Pyodide bundle workerd reads from disk
and unpacks Cloudflare's Python SDK into ``HOME``. doemu does not vendor any of it: this module
only finds the folder, runs its ``setup.sh`` once per process (it is idempotent, ~5 s when
``HOME`` is ready, ~15 s from nothing, with the npm and PyPI registries), and checks that the
three things the runner needs exist:

* the ``workerd`` binary (npm ``@cloudflare/workerd-<platform>``'s ``bin/workerd``; the
  ``.bin/workerd`` shim would put a Node process between the runner and workerd);
* ``HOME/cache``, the ``--pyodide-bundle-disk-cache-dir`` holding ``pyodide_dev.capnp.bin``;
* ``HOME/sdk/py``, the ``workers-runtime-sdk`` files served as ``python_modules/``.

Where things are: ``DOEMU_PYWORKERD`` names the pyworkerd folder, else
``<doemu checkout>/../shared/pyworkerd``; ``PYWORKERD_HOME`` names ``HOME``, else
``$XDG_CACHE_HOME/doemu/pyworkerd`` (``~/.cache/doemu/pyworkerd``). When anything is missing,
:class:`PyworkerdUnavailableError` says exactly what, so a test can skip with that reason.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ...errors import DoemuError

__all__ = [
    "BUNDLE_FILE",
    "PyworkerdPaths",
    "PyworkerdUnavailableError",
    "WorkerdError",
    "default_home",
    "find_pyworkerd",
    "prepare_pyworkerd",
]

#: The Pyodide bundle setup.sh builds (workerd's ``dev`` bundle, read from the disk cache).
BUNDLE_FILE = "pyodide_dev.capnp.bin"

#: The repository checkout doemu is imported from (``doemu/testing/workerd/`` → three up).
_CHECKOUT = Path(__file__).resolve().parents[3]


class WorkerdError(DoemuError):
    """Root of the workerd runner's errors."""


class PyworkerdUnavailableError(WorkerdError):
    """pyworkerd cannot be prepared; ``missing`` names what is missing (a path or a tool)."""

    def __init__(self, message: str, *, missing: str) -> None:
        super().__init__(message)
        self.missing = missing


@dataclass(frozen=True)
class PyworkerdPaths:
    """What a prepared pyworkerd ``home`` provides."""

    home: Path
    workerd: Path
    bundle_cache: Path
    sdk: Path


def find_pyworkerd(environ: Mapping[str, str] | None = None) -> Path:
    """The pyworkerd folder: ``DOEMU_PYWORKERD``, else ``<checkout>/../shared/pyworkerd``."""
    env = os.environ if environ is None else environ
    named = env.get("DOEMU_PYWORKERD")
    folder = Path(named) if named else _CHECKOUT.parent / "shared" / "pyworkerd"
    how = "DOEMU_PYWORKERD" if named else "the default beside the doemu checkout"
    if not (folder / "setup.sh").is_file():
        raise PyworkerdUnavailableError(
            f"pyworkerd not found: {folder} ({how}) has no setup.sh; "
            "set DOEMU_PYWORKERD to the pyworkerd folder",
            missing=str(folder / "setup.sh"),
        )
    return folder.resolve()


def default_home(environ: Mapping[str, str] | None = None) -> Path:
    """``PYWORKERD_HOME``, else doemu's cache directory for pyworkerd."""
    env = os.environ if environ is None else environ
    named = env.get("PYWORKERD_HOME")
    if named:
        return Path(named)
    cache = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "doemu" / "pyworkerd"


_prepared: dict[tuple[Path, Path], PyworkerdPaths] = {}
_lock = threading.Lock()


def prepare_pyworkerd(
    folder: Path | None = None, home: Path | None = None, *, timeout: float = 600.0
) -> PyworkerdPaths:
    """Run pyworkerd's ``setup.sh HOME`` (once per process for a given folder and home) and
    return the paths; raises :class:`PyworkerdUnavailableError` naming what is missing."""
    source = find_pyworkerd() if folder is None else folder.resolve()
    target = (default_home() if home is None else home).absolute()
    key = (source, target)
    with _lock:
        cached = _prepared.get(key)
        if cached is not None:
            return cached
        paths = _setup(source, target, timeout)
        _prepared[key] = paths
        return paths


def _setup(source: Path, home: Path, timeout: float) -> PyworkerdPaths:
    script = source / "setup.sh"
    if not script.is_file():
        raise PyworkerdUnavailableError(f"{script} does not exist", missing=str(script))
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PyworkerdUnavailableError(f"cannot create {home}: {exc}", missing=str(home)) from None
    # Two test runs preparing one home at once would race in `npm ci`: one at a time.
    with (home / ".doemu-setup.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _run_setup(script, home, timeout)


def _run_setup(script: Path, home: Path, timeout: float) -> PyworkerdPaths:
    try:
        done = subprocess.run(
            ["bash", str(script), str(home)],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except FileNotFoundError:
        raise PyworkerdUnavailableError("bash is not installed", missing="bash") from None
    except subprocess.TimeoutExpired:
        raise PyworkerdUnavailableError(
            f"{script} {home} did not finish within {timeout:.0f} s", missing=str(home)
        ) from None
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        raise PyworkerdUnavailableError(
            f"{script} {home} failed (exit {done.returncode}):\n{tail}", missing=str(home)
        )
    return _check(home)


def _check(home: Path) -> PyworkerdPaths:
    binaries = sorted(home.glob("node_modules/@cloudflare/workerd-*/bin/workerd"))
    workerd = next((path for path in binaries if os.access(path, os.X_OK)), None)
    if workerd is None:
        wanted = home / "node_modules/@cloudflare/workerd-<platform>/bin/workerd"
        raise PyworkerdUnavailableError(
            f"setup.sh left no workerd binary for this platform ({wanted})", missing=str(wanted)
        )
    cache = home / "cache"
    if not (cache / BUNDLE_FILE).is_file():
        raise PyworkerdUnavailableError(
            f"setup.sh left no Pyodide bundle ({cache / BUNDLE_FILE})",
            missing=str(cache / BUNDLE_FILE),
        )
    sdk = home / "sdk" / "py"
    if not (sdk / "workers" / "__init__.py").is_file():
        raise PyworkerdUnavailableError(
            f"setup.sh left no Python Workers SDK ({sdk / 'workers'})", missing=str(sdk)
        )
    return PyworkerdPaths(home=home, workerd=workerd, bundle_cache=cache, sdk=sdk)
