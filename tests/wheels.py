"""Real wheels and throwaway venvs for the packaging tests: doemu's own wheel, built once per
session, and tiny hand-made wheels of other distributions installed beside it by pip."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

__all__ = ["ROOT", "build_doemu_wheel", "make_venv", "make_wheel"]

ROOT = Path(__file__).resolve().parent.parent
PIP = [sys.executable, "-m", "pip"]


def build_doemu_wheel(into: Path) -> Path:
    """``pip wheel`` of this repository: the wheel a user would install."""
    built = subprocess.run(
        [*PIP, "wheel", "-q", "--no-deps", "-w", str(into), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = into.glob("doemu-*.whl")
    return wheel


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(into: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A minimal, valid wheel of distribution ``name`` holding ``files`` (path → text)."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    contents = {
        **{path: text.encode() for path, text in files.items()},
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: doemu-tests\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = [f"{path},{_digest(data)},{len(data)}" for path, data in contents.items()]
    contents[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    wheel = into / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in contents.items():
            archive.writestr(path, data)
    return wheel


def make_venv(path: Path, *wheels: Path) -> Path:
    """A venv with ``wheels`` installed by pip in that order (no dependencies, no index);
    doemu's dependencies come from this interpreter's site-packages through a path-only
    ``.pth`` (which runs none of that folder's own ``.pth`` hooks). Returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    exe = path / "bin" / "python"
    for wheel in wheels:
        installed = subprocess.run(
            [*PIP, "--python", str(exe), "install", "-q", "--no-deps", "--no-index", str(wheel)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert installed.returncode == 0, installed.stderr
    site = subprocess.run(
        [str(exe), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "zz-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return exe
