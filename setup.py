"""Build hook: the files doemu's wheel ships at the top of site-packages, beside its packages.

Everything else about the build is in ``pyproject.toml``. Two kinds of top-level files cannot be
declared there, so ``build_py`` adds them:

* ``doemu-standins.pth``: one line run at interpreter start that makes ``import workers`` /
  ``js`` / ``pyodide.ffi`` resolve to doemu's stand-ins when nothing else provides them, while
  importing nothing until one of them is imported (the line is
  :data:`doemu.standins.PTH_LINE`; that module says why a finder, and why it is safe for
  deploying);
* ``stubs/*-stubs``: PEP 561 stub-only packages for those three modules (mypy, editors).

A regular wheel gets them from ``build_lib``. An editable install (``pip install -e``) builds no
``build_lib`` into the wheel, only the directory its ``install`` command points at, so they are
written there instead.
"""

from __future__ import annotations

import importlib.util
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PTH_NAME = "doemu-standins.pth"
STUBS = ("workers-stubs", "js-stubs", "pyodide-stubs")


def _pth_line() -> str:
    """``doemu.standins.PTH_LINE``, read from the source (the package is not importable here)."""
    spec = importlib.util.spec_from_file_location(
        "_doemu_standins", os.path.join(HERE, "doemu", "standins.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    line: str = module.PTH_LINE
    return line


class BuildPyWithTopLevelFiles(build_py):
    """``build_py`` that also writes the ``.pth`` file and the stub packages (see above)."""

    def run(self) -> None:
        super().run()
        target = self.build_lib
        if getattr(self, "editable_mode", False):
            target = self.get_finalized_command("install").install_lib
        os.makedirs(target, exist_ok=True)
        with open(os.path.join(target, PTH_NAME), "w", encoding="utf-8") as pth:
            pth.write(_pth_line())
        for name in STUBS:
            destination = os.path.join(target, name)
            shutil.rmtree(destination, ignore_errors=True)
            shutil.copytree(os.path.join(HERE, "stubs", name), destination)


setup(cmdclass={"build_py": BuildPyWithTopLevelFiles})
