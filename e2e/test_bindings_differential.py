"""The same Python Worker on Miniflare and on doemu: what each binding call gives Python code.

Each scenario in ``e2e/miniflare/scenarios/`` is a Python Worker whose ``fetch`` makes a series
of binding calls and records, step by step, what Python code sees: a value's type and content,
or an error's type and text. It runs unchanged

* on **Miniflare** (npm ``miniflare``, pinned in ``e2e/miniflare/package.json``: what ``wrangler
  dev`` runs), with workerd running the Worker on Pyodide and the Python Workers SDK
  (workers-runtime-sdk 1.9.5) served as ``python_modules/`` as pywrangler bundles it, so its
  ``env`` is the SDK's ``_EnvWrapper`` and every result goes through ``python_from_rpc``; and
* on **doemu**, in process (the Worker imported from the same file).

The two records must be equal step for step, except the differences listed in ``KNOWN`` (each
with its reason, each documented in the README); a step missing on one side fails too.

Running Python on workerd offline needs a workerd binary and Pyodide bundle made for it: the
pyworkerd setup (``../shared/pyworkerd/setup.sh``; its home is found through
``DOEMU_PYWORKERD_HOME``, else ``/tmp/pyworkerd-home``). Without it, or without node and npm,
the test is skipped and says why.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from .twins import install_miniflare

HERE = Path(__file__).resolve().parent
MINIFLARE = HERE / "miniflare"
SCENARIOS = MINIFLARE / "scenarios"
T_CRON = 1_700_000_000_000

#: (scenario, step) → why doemu differs from Miniflare there (each also in the README).
_EXEC = (
    "exec() stops at the failing line, keeps the lines before it and names that line, as "
    "Cloudflare documents; Miniflare runs the script as one transaction and names line 1"
)
_STORAGE_CLASS = 'storageClass is "Standard", as Cloudflare documents; Miniflare says ""'
_LISTED = (
    "list() gives R2Object values; through the SDK they are raw JS objects (their metadata JS "
    "objects, uploaded a JS Date)"
)
#: Where doemu differs from Miniflare on purpose: (regex on the record path, reason). Each is
#: in the README's bindings table.
KNOWN: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"d1\.exec_error_(second_line|kept)\b"), _EXEC),
    (re.compile(r"r2\..*\.storageClass\b"), _STORAGE_CLASS),
    (
        re.compile(
            r"r2\.[a-z_]+\.objects\[\d+\]\.(checksums|customMetadata|httpMetadata|md5|uploaded)\b"
        ),
        _LISTED,
    ),
]


def _pyworkerd_home() -> Path | None:
    for candidate in (os.environ.get("DOEMU_PYWORKERD_HOME"), "/tmp/pyworkerd-home"):
        if not candidate:
            continue
        home = Path(candidate)
        ready = [
            home / "node_modules" / ".bin" / "workerd",
            home / "cache" / "pyodide_dev.capnp.bin",
            home / "sdk" / "py" / "workers" / "rpc.py",
        ]
        if all(p.exists() for p in ready):
            return home
    return None


@pytest.fixture(scope="module")
def miniflare(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """What running a scenario on Miniflare needs; skips (saying why) when it is missing."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        pytest.skip("node/npm are not installed; the Miniflare differential needs them")
    home = _pyworkerd_home()
    if home is None:
        pytest.skip(
            "no pyworkerd home (workerd + offline Pyodide bundle + Python Workers SDK): run "
            "../shared/pyworkerd/setup.sh and set DOEMU_PYWORKERD_HOME"
        )
    install_miniflare(npm)
    wrapper = tmp_path_factory.mktemp("workerd") / "workerd"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'exec "{home}/node_modules/.bin/workerd" "$@" '
        f'--pyodide-bundle-disk-cache-dir="{home}/cache"\n'
    )
    wrapper.chmod(0o755)
    yield {"node": node, "sdk": home / "sdk" / "py", "workerd": wrapper}


def on_miniflare(
    setup: dict[str, Any], scenario: str, paths: list[str], assets: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    extra = {"ASSETS": json.dumps(assets)} if assets is not None else {}
    run = subprocess.run(
        [setup["node"], "run.mjs", str(SCENARIOS / f"{scenario}.py"), str(setup["sdk"]), *paths],
        cwd=MINIFLARE,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MINIFLARE_WORKERD_PATH": str(setup["workerd"]), **extra},
    )
    assert run.returncode == 0, f"Miniflare failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return [json.loads(line) for line in run.stdout.splitlines() if line.startswith('{"path"')]


WRANGLER = """\
name = "main"
main = "src/worker.py"
compatibility_date = "2026-05-01"
compatibility_flags = ["python_workers"]
kv_namespaces = [{ binding = "KV" }]
d1_databases = [{ binding = "DB" }]
r2_buckets = [{ binding = "R2" }]
"""
SERVICES = """\
services = [{ binding = "SVC", service = "main", entrypoint = "Named" }, \
{ binding = "SELF", service = "main" }]
"""


async def on_doemu(
    tmp_path: Path, scenario: str, paths: list[str], assets: str = ""
) -> list[dict[str, Any]]:
    """The scenario as a doemu project, served in process (the test's event loop); ``assets`` is
    its ``[assets]`` table (TOML)."""
    from doemu.bindings import find_entrypoints
    from doemu.config import load_config
    from doemu.loader import load_worker, unload_user_modules
    from doemu.runtime import Runtime
    from doemu.server.app import DoemuApp

    project = tmp_path / scenario
    (project / "src").mkdir(parents=True)
    source = (SCENARIOS / f"{scenario}.py").read_text()
    (project / "src" / "worker.py").write_text(source)
    shutil.copy(SCENARIOS / "record.py", project / "src" / "record.py")
    (project / "wrangler.toml").write_text(
        WRANGLER + (SERVICES if "class Named(" in source else "") + assets
    )
    config = load_config(project / "wrangler.toml")
    loaded = load_worker(config)
    runtime = Runtime(
        worker_name=config.name,
        classes={},
        persist_dir=project / ".state",
        resources=config.resources,
        entrypoints=find_entrypoints(loaded.module),
    )
    await runtime.start()
    answers = []
    try:
        transport = httpx.ASGITransport(app=DoemuApp(runtime, entry=loaded.entry))
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            for path in paths:
                if path.startswith("scheduled:"):
                    assert runtime.extra.crons is not None
                    result = await runtime.extra.crons.run(path.split(":", 1)[1], T_CRON)
                    body = json.dumps({"outcome": result["outcome"], "noRetry": result["noRetry"]})
                    answers.append({"path": path, "status": 200, "headers": {}, "body": body})
                    continue
                target, _, header = path.partition("|")
                name, _, value = header.partition(":")
                headers = {name.strip(): value.strip()} if header else {}
                response = await http.get(target, headers=headers)
                answers.append(
                    {
                        "path": path,
                        "status": response.status_code,
                        "headers": dict(response.headers),
                        "body": response.text,
                    }
                )
    finally:
        await runtime.close()
        unload_user_modules()
    return answers


def differences(reference: Any, ours: Any, where: str) -> Iterator[tuple[str, Any, Any]]:
    """``(path, Miniflare's, doemu's)`` for every leaf where two records differ."""
    if isinstance(reference, dict) and isinstance(ours, dict):
        for key in sorted(set(reference) | set(ours)):
            yield from differences(reference.get(key, "<missing>"), ours.get(key, "<missing>"),
                                   f"{where}.{key}")  # fmt: skip
    elif isinstance(reference, list) and isinstance(ours, list) and len(reference) == len(ours):
        for index, (a, b) in enumerate(zip(reference, ours, strict=True)):
            yield from differences(a, b, f"{where}[{index}]")
    elif reference != ours:
        yield where, reference, ours


def compare(scenario: str, reference: dict[str, Any], ours: dict[str, Any]) -> list[str]:
    """Every place where the two records differ (known differences left out)."""
    problems = []
    for path, theirs, mine in differences(reference, ours, scenario):
        if any(pattern.match(path) for pattern, _ in KNOWN):
            continue
        problems.append(f"{path}:\n  Miniflare: {theirs}\n  doemu:     {mine}")
    return problems


@pytest.mark.parametrize(
    ("scenario", "paths"),
    [
        ("kv", ["/"]),
        ("d1", ["/"]),
        ("r2", ["/"]),
        ("services", ["/"]),
        ("crons", ["scheduled:*/5 * * * *", "/"]),
    ],
)
async def test_the_same_python_worker_on_miniflare_and_on_doemu(
    miniflare: dict[str, Any], tmp_path: Path, scenario: str, paths: list[str]
) -> None:
    reference = on_miniflare(miniflare, scenario, paths)
    ours = await on_doemu(tmp_path, scenario, paths)
    assert [a["status"] for a in ours] == [a["status"] for a in reference], (reference, ours)
    problems = compare(scenario, json.loads(reference[-1]["body"]), json.loads(ours[-1]["body"]))
    assert not problems, f"{scenario}: doemu differs from Miniflare\n" + "\n".join(problems)


def test_known_differences_name_existing_scenarios() -> None:
    scenarios = {p.stem for p in SCENARIOS.glob("*.py")} - {"record"}
    for pattern, reason in KNOWN:
        assert pattern.pattern.split("\\.", 1)[0] in scenarios and reason


ASSET_PATHS = [
    "/", "/file", "/file.html", "/file/", "/file/index", "/folder", "/folder/", "/folder.html",
    "/folder/index", "/folder/index.html", "/index.html", "/app.js", "/nope", "/a%20b.txt",
    "/[x].txt", "/%5Bx%5D.txt", "/secret.txt", "/file.html?q=1", "/via-binding/nope",
    "/via-binding/sub/deep/nope", "/via-binding/file", "/api/users", "/api/docs/intro",
    "/dashboard",
]  # fmt: skip
# (A navigation request cannot be compared: undici's fetch, behind Miniflare's dispatchFetch, sets
# Sec-Fetch-Mode itself. tests/test_bindings_assets.py checks that rule against Cloudflare's code.)
ASSET_CONFIGS = {
    "auto": {},
    "force": {"html_handling": "force-trailing-slash"},
    "drop": {"html_handling": "drop-trailing-slash"},
    "none": {"html_handling": "none"},
    "404-page": {"not_found_handling": "404-page"},
    "spa": {"not_found_handling": "single-page-application"},
    "spa-routes": {
        "not_found_handling": "single-page-application",
        "run_worker_first": ["/api/*", "!/api/docs/*"],
    },
    "worker-first": {"run_worker_first": True},
}


def _public(root: Path) -> Path:
    files = {
        "index.html": "<p>home</p>", "file.html": "<p>file</p>",
        "folder/index.html": "<p>folder</p>", "app.js": "console.log(1)",
        "404.html": "top 404", "sub/404.html": "sub 404", "a b.txt": "spaced",
        "[x].txt": "bracketed", "secret.txt": "never served", ".assetsignore": "secret.txt\n",
    }  # fmt: skip
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _answer(answer: dict[str, Any]) -> dict[str, Any]:
    """What must agree: status, redirect target, body, content type, whether there is an ETag."""
    headers = {k.lower(): v for k, v in answer["headers"].items()}
    return {
        "status": answer["status"],
        "location": headers.get("location"),
        "body": answer["body"],
        "content-type": headers.get("content-type", "").replace(" ", "").lower() or None,
        "etag": "etag" in headers,
    }


@pytest.mark.parametrize("name", sorted(ASSET_CONFIGS))
async def test_static_assets_on_miniflare_and_on_doemu(
    miniflare: dict[str, Any], tmp_path: Path, name: str
) -> None:
    config = ASSET_CONFIGS[name]
    public = _public(tmp_path / "assets" / "public")
    router: dict[str, Any] = {"has_user_worker": True}
    first = config.get("run_worker_first")
    if first is True:
        router["invoke_user_worker_ahead_of_assets"] = True
    elif isinstance(first, list):
        router["static_routing"] = {
            "user_worker": [r for r in first if not r.startswith("!")],
            "asset_worker": [r[1:] for r in first if r.startswith("!")],
        }
    asset_config = {k: v for k, v in config.items() if k != "run_worker_first"}
    reference = on_miniflare(
        miniflare,
        "assets",
        ASSET_PATHS,
        {"directory": str(public), "binding": "ASSETS", "routerConfig": router,
         "assetConfig": asset_config},
    )  # fmt: skip
    table = "".join(f"{k} = {json.dumps(v)}\n" for k, v in config.items())
    toml = f'\n[assets]\ndirectory = "{public}"\nbinding = "ASSETS"\n{table}'
    ours = await on_doemu(tmp_path, "assets", ASSET_PATHS, toml)
    problems = [
        f"{path}:\n  Miniflare: {_answer(theirs)}\n  doemu:     {_answer(mine)}"
        for path, theirs, mine in zip(ASSET_PATHS, reference, ours, strict=True)
        if _answer(theirs) != _answer(mine)
    ]
    assert not problems, f"assets ({name}): doemu differs from Miniflare\n" + "\n".join(problems)
