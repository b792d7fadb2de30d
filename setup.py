"""Build hook: the files doemu's wheel ships at the top of site-packages, beside its packages.

Everything else about the build is in ``pyproject.toml``. Two kinds of top-level files cannot be
declared there, so ``build_py`` adds them:

* ``doemu-standins.pth``: one line run at interpreter start that makes ``import workers`` /
  ``js`` / ``pyodide.ffi`` resolve to doemu's stand-ins when nothing else provides them (see
  :mod:`doemu.standins` for why a fallback finder, and why that is safe for deploying);
* ``stubs/*-stubs``: PEP 561 stub-only packages for those three modules (mypy, editors).

A regular wheel gets them from ``build_lib``. An editable install (``pip install -e``) builds no
``build_lib`` into the wheel, only the directory its ``install`` command points at, so they are
written there instead.
"""

from __future__ import annotations

import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PTH_NAME = "doemu-standins.pth"
# A broken or half-removed install must never stop an interpreter from starting.
PTH_LINE = (
    "import sys; exec('try:\\n from doemu.standins import install\\n install()\\n"
    "except Exception:\\n pass')\n"
)
STUBS = ("workers-stubs", "js-stubs", "pyodide-stubs")


class BuildPyWithTopLevelFiles(build_py):
    """``build_py`` that also writes the ``.pth`` file and the stub packages (see above)."""

    def run(self) -> None:
        super().run()
        target = self.build_lib
        if getattr(self, "editable_mode", False):
            target = self.get_finalized_command("install").install_lib
        os.makedirs(target, exist_ok=True)
        with open(os.path.join(target, PTH_NAME), "w", encoding="utf-8") as pth:
            pth.write(PTH_LINE)
        for name in STUBS:
            destination = os.path.join(target, name)
            shutil.rmtree(destination, ignore_errors=True)
            shutil.copytree(os.path.join(HERE, "stubs", name), destination)


setup(cmdclass={"build_py": BuildPyWithTopLevelFiles})
