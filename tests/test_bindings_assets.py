"""Static assets: Cloudflare's html_handling tables, not_found_handling, routing before the
Worker (run_worker_first), env.ASSETS.fetch, response headers, and files that are never served."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from workers import Response, WorkerEntrypoint

from doemu.clock import ManualClock
from doemu.config import ConfigValueError
from doemu.config.bindings import AssetsConfig, WorkerResources
from doemu.runtime import Runtime
from doemu.server.app import DoemuApp

from .admin_helpers import T0, client
from .config_helpers import BASE_TOML, load


class Default(WorkerEntrypoint):
    async def fetch(self, request: Any) -> Any:
        path = request.url.split("://", 1)[1].split("/", 1)[1]
        if path.startswith("via-binding/"):
            return await self.env.ASSETS.fetch("http://x/" + path[len("via-binding/") :])
        return Response(f"worker: /{path}")


@pytest.fixture
def public(tmp_path: Path) -> Path:
    root = tmp_path / "public"
    (root / "folder").mkdir(parents=True)
    (root / "sub" / "deep").mkdir(parents=True)
    (root / "index.html").write_text("<p>home</p>")
    (root / "file.html").write_text("<p>file</p>")
    (root / "folder" / "index.html").write_text("<p>folder</p>")
    (root / "app.js").write_text("console.log(1)")
    (root / "logo.png").write_bytes(b"\x89PNG")
    (root / "404.html").write_text("top 404")
    (root / "sub" / "404.html").write_text("sub 404")
    (root / "a b.txt").write_text("spaced")
    (root / "[x].txt").write_text("bracketed")
    (root / "secret.txt").write_text("never served")
    (root / ".assetsignore").write_text("secret.txt\n")
    (root / "_headers").write_text("/*\n  X-Never: 1\n")
    (tmp_path / "outside.txt").write_text("outside")
    return root


def _assets(public: Path, **options: Any) -> WorkerResources:
    return WorkerResources(assets=AssetsConfig(public, **options))


@pytest.fixture
async def serve(tmp_path: Path) -> AsyncIterator[Any]:
    runtimes: list[Runtime] = []
    clients: list[httpx.AsyncClient] = []

    async def start(resources: WorkerResources, entry: type | None = Default) -> Any:
        runtime = Runtime(
            worker_name="assets",
            classes={},
            persist_dir=tmp_path / f"state-{len(runtimes)}",
            clock=ManualClock(T0),
            resources=resources,
            entrypoints={"Default": entry} if entry else {},
        )
        await runtime.start()
        runtimes.append(runtime)
        http = client(DoemuApp(runtime, entry=entry))
        clients.append(http)
        return http

    yield start
    for http in clients:
        await http.aclose()
    for runtime in runtimes:
        await runtime.close()


async def outcome(http: httpx.AsyncClient, path: str, **kwargs: Any) -> tuple[int, str]:
    response = await http.get(path, **kwargs)
    if response.status_code in (301, 302, 307, 308):
        return response.status_code, response.headers["location"]
    return response.status_code, response.text


# Cloudflare's asset-worker decides these (workers-sdk asset-worker handler.ts); where its docs
# table says otherwise (/folder/index, /folder.html), the implementation is followed.
AUTO = [
    ("/", 200, "<p>home</p>"),
    ("/file", 200, "<p>file</p>"),
    ("/file.html", 307, "/file"),
    ("/file/", 307, "/file"),
    ("/file/index", 307, "/file"),
    ("/file/index.html", 307, "/file"),
    ("/folder", 307, "/folder/"),
    ("/folder.html", 307, "/folder/"),
    ("/folder/", 200, "<p>folder</p>"),
    ("/folder/index", 307, "/folder/"),
    ("/folder/index.html", 307, "/folder/"),
    ("/index.html", 307, "/"),
]
FORCE = [
    ("/file", 307, "/file/"),
    ("/file.html", 307, "/file/"),
    ("/file/", 200, "<p>file</p>"),
    ("/folder", 307, "/folder/"),
    ("/folder/", 200, "<p>folder</p>"),
    ("/folder/index.html", 307, "/folder/"),
]
DROP = [
    ("/file", 200, "<p>file</p>"),
    ("/file/", 307, "/file"),
    ("/folder", 200, "<p>folder</p>"),
    ("/folder/", 307, "/folder"),
    ("/folder/index.html", 307, "/folder"),
    ("/", 200, "<p>home</p>"),
    ("/index.html", 307, "/"),
]
NONE = [
    ("/file", 200, "worker: /file"),
    ("/file.html", 200, "<p>file</p>"),
    ("/folder/", 200, "worker: /folder/"),
    ("/folder/index.html", 200, "<p>folder</p>"),
]


@pytest.mark.parametrize(
    ("handling", "table"),
    [("auto-trailing-slash", AUTO), ("force-trailing-slash", FORCE),
     ("drop-trailing-slash", DROP), ("none", NONE)],
)  # fmt: skip
async def test_html_handling(
    serve: Any, public: Path, handling: str, table: list[tuple[str, int, str]]
) -> None:
    http = await serve(_assets(public, html_handling=handling))
    got = [(path, *(await outcome(http, path))) for path, _, _ in table]
    assert got == table


async def test_responses_carry_cloudflares_headers(serve: Any, public: Path) -> None:
    http = await serve(_assets(public))
    script = await http.get("/app.js")
    assert script.status_code == 200 and script.text == "console.log(1)"
    assert script.headers["content-type"] == "text/javascript; charset=utf-8"
    assert script.headers["cache-control"] == "public, max-age=0, must-revalidate"
    etag = script.headers["etag"]
    assert etag.startswith('"') and len(etag) == 34
    assert (await http.get("/logo.png")).headers["content-type"] == "image/png"
    again = await http.get("/app.js", headers={"if-none-match": etag})
    assert (again.status_code, again.content) == (304, b"")
    head = await http.head("/app.js")
    assert (head.status_code, head.content) == (200, b"")
    assert head.headers["content-length"] == str(len("console.log(1)"))
    private = await http.get("/app.js", headers={"authorization": "Bearer x"})
    assert "cache-control" not in private.headers
    posted = await http.post("/app.js", content=b"x")
    assert posted.status_code == 405  # an asset path answers GET and HEAD only
    assert await outcome(http, "/a%20b.txt") == (200, "spaced")
    assert await outcome(http, "/[x].txt") == (307, "/%5Bx%5D.txt")  # the canonical spelling
    assert await outcome(http, "/%5Bx%5D.txt") == (200, "bracketed")
    assert await outcome(http, "/file?x=1") == (200, "<p>file</p>")
    assert await outcome(http, "/file.html?x=1") == (307, "/file?x=1")


async def test_files_that_are_never_served(serve: Any, public: Path) -> None:
    http = await serve(_assets(public))
    for path in ("/secret.txt", "/_headers", "/.assetsignore", "/../outside.txt",
                 "/%2e%2e/outside.txt", "/folder/..%2F..%2Foutside.txt"):  # fmt: skip
        assert (await outcome(http, path))[1].startswith("worker: "), path
    link = public / "link.txt"
    link.symlink_to(public.parent / "outside.txt")
    assert (await outcome(http, "/link.txt"))[1] == "worker: /link.txt"


async def test_not_found_handling(serve: Any, public: Path) -> None:
    # Unmatched requests go to the Worker; its ASSETS binding applies not_found_handling.
    page = await serve(_assets(public, binding="ASSETS", not_found_handling="404-page"))
    assert await outcome(page, "/nope") == (200, "worker: /nope")
    assert await outcome(page, "/via-binding/sub/deep/nope") == (404, "sub 404")
    assert await outcome(page, "/via-binding/nope") == (404, "top 404")
    assert await outcome(page, "/via-binding/app.js") == (200, "console.log(1)")
    # A fetch() through the binding follows the redirect, as on Cloudflare.
    assert await outcome(page, "/via-binding/file.html") == (200, "<p>file</p>")
    spa = await serve(_assets(public, not_found_handling="single-page-application"))
    navigate = {"sec-fetch-mode": "navigate"}
    assert await outcome(spa, "/some/route", headers=navigate) == (200, "<p>home</p>")
    assert await outcome(spa, "/api/data") == (200, "worker: /api/data")  # not a navigation
    nothing = await serve(_assets(public, binding="ASSETS"))
    response = await nothing.get("/via-binding/nope")
    assert (response.status_code, response.content) == (404, b"")


async def test_run_worker_first(serve: Any, public: Path) -> None:
    always = await serve(_assets(public, binding="ASSETS", run_worker_first=True))
    assert await outcome(always, "/app.js") == (200, "worker: /app.js")
    assert await outcome(always, "/via-binding/app.js") == (200, "console.log(1)")
    routed = await serve(
        _assets(
            public,
            not_found_handling="single-page-application",
            run_worker_first=("/api/*", "!/api/docs/*"),
        )
    )
    assert await outcome(routed, "/api/users") == (200, "worker: /api/users")
    assert await outcome(routed, "/api/docs/intro") == (200, "<p>home</p>")  # excluded: assets
    assert await outcome(routed, "/dashboard") == (200, "<p>home</p>")  # the SPA, navigation or not
    assert await outcome(routed, "/app.js") == (200, "console.log(1)")


async def test_without_an_entry_worker_assets_come_before_the_default_router(
    serve: Any, public: Path
) -> None:
    http = await serve(_assets(public, not_found_handling="404-page"), entry=None)
    assert await outcome(http, "/file") == (200, "<p>file</p>")
    missing = await http.get("/nope/x")
    assert missing.status_code == 404  # doemu's default router: no such binding


def test_assets_config(tmp_path: Path, public: Path) -> None:
    config = load(
        tmp_path,
        BASE_TOML + '[assets]\ndirectory = "public"\nbinding = "ASSETS"\n'
        'not_found_handling = "404-page"\nrun_worker_first = ["/api/*"]\n',
    )
    assets = config.resources.assets
    assert assets is not None and assets.directory == public.resolve()
    assert (assets.binding, assets.not_found_handling) == ("ASSETS", "404-page")
    assert assets.run_worker_first == ("/api/*",) and not config.warnings
    with pytest.raises(ConfigValueError) as info:
        load(tmp_path, BASE_TOML + '[assets]\ndirectory = "nowhere"\nhtml_handling = "x"\n')
    problems = " ".join(info.value.problems)
    assert "assets.html_handling must be one of auto-trailing-slash" in problems
    assert 'assets.directory "nowhere" does not exist' in problems
