"""Which static asset a path names: Cloudflare's ``html_handling`` and ``not_found_handling``.

The rules are those of Cloudflare's asset server (workers-sdk's asset-worker), written for a
folder on disk: a path is decoded segment by segment (duplicate slashes folded), then resolved
to one of three *intents*: serve a file (with status 200, or 404 for a ``404.html``), redirect
(307) to the canonical path, or nothing (the Worker gets the request). With the default
``auto-trailing-slash``, ``/about`` serves ``about.html``, ``/blog/`` serves
``blog/index.html``, and the other spellings of those (``/about.html``, ``/blog``,
``/blog/index.html``…) redirect there; ``force-trailing-slash``, ``drop-trailing-slash`` and
``none`` change which spelling is canonical, as Cloudflare documents. A redirect is only made to
a path that serves the very same file (same etag), so no redirect ever leads nowhere.

``not_found_handling``: ``single-page-application`` serves ``/index.html`` (200) for a path
that matches nothing, ``404-page`` the nearest ``404.html`` up the path (404), ``none`` nothing.

Files are found under the folder only: ``..`` never resolves, nor does a link that leads out of
it, nor a file the project's ``.assetsignore`` (or wrangler's defaults) leaves out.
"""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

from ...config.bindings import HtmlHandling, NotFoundHandling

__all__ = ["AssetFolder", "Intent", "decode_path", "encode_path"]

#: Try each ``(file, destination)``: the first redirect that serves that file (see _redirect).
_Redirect = Callable[..., "Intent | None"]

#: What wrangler never uploads, beside the folder's ``.assetsignore`` patterns.
_ALWAYS_IGNORED = (".assetsignore", "_worker.js", "_redirects", "_headers", ".DS_Store")
_IGNORED_DIRS = (".git", "node_modules", ".wrangler")


@dataclass(frozen=True, slots=True)
class Intent:
    """Serve ``file`` with ``status``, or redirect to ``redirect`` (a decoded path)."""

    file: Path | None = None
    etag: str | None = None
    status: int = 200
    redirect: str | None = None


def decode_path(pathname: str) -> str:
    """Each segment percent-decoded; runs of ``/`` folded into one."""
    parts = pathname.split("/")
    decoded = "/".join(
        unquote(part, errors="strict") if _decodable(part) else part for part in parts
    )
    while "//" in decoded:
        decoded = decoded.replace("//", "/")
    return decoded


def _decodable(part: str) -> bool:
    try:
        unquote(part, errors="strict")
    except UnicodeDecodeError:
        return False
    return True


def encode_path(pathname: str) -> str:
    """The canonical spelling: each segment as ``encodeURIComponent`` writes it."""
    return "/".join(quote(part, safe="!'()*-._~") for part in pathname.split("/"))


def _never(*options: tuple[str, str]) -> Intent | None:
    """Redirects skipped (what a path resolves to when it is itself a redirect's target)."""
    return None


class AssetFolder:
    """The files of ``[assets] directory`` and the rules that map paths onto them."""

    def __init__(
        self, root: Path, html_handling: HtmlHandling, not_found_handling: NotFoundHandling
    ) -> None:
        self.root = root.resolve()
        self.html_handling = html_handling
        self.not_found_handling = not_found_handling
        ignore = self.root / ".assetsignore"
        lines = ignore.read_text(encoding="utf-8").splitlines() if ignore.is_file() else []
        self._ignore = [line.strip() for line in lines if line.strip() and not line.startswith("#")]

    # -- files -------------------------------------------------------------------------------------
    def file(self, path: str) -> Path | None:
        """The file a decoded path names, if it is a servable asset."""
        relative = path.lstrip("/")
        if not relative or any(part in ("", ".", "..") for part in relative.split("/")):
            return None
        if self._ignored(relative):
            return None
        candidate = self.root / relative
        try:
            real = candidate.resolve()
        except OSError:
            return None
        if not real.is_relative_to(self.root) or not real.is_file():
            return None
        return real

    def _ignored(self, relative: str) -> bool:
        parts = relative.split("/")
        if parts[-1] in _ALWAYS_IGNORED or any(p in _IGNORED_DIRS for p in parts[:-1]):
            return True
        for pattern in self._ignore:
            bare = pattern.strip("/")
            if fnmatch.fnmatch(relative, bare) or fnmatch.fnmatch(parts[-1], bare):
                return True
            if any(fnmatch.fnmatch("/".join(parts[: i + 1]), bare) for i in range(len(parts))):
                return True
        return False

    def etag(self, path: str) -> str | None:
        """The asset's etag, or None when the path names no asset.

        Cloudflare hashes the content; doemu hashes what identifies this version of the file
        (its inode, size and modification time), which changes whenever the content does and
        never makes a request read a whole file just to answer it.
        """
        file = self.file(path)
        if file is None:
            return None
        stat = file.stat()
        key = f"{stat.st_ino}:{stat.st_size}:{stat.st_mtime_ns}".encode()
        return hashlib.sha256(key).hexdigest()[:32]

    def _serve(self, path: str, status: int = 200) -> Intent | None:
        etag = self.etag(path)
        if etag is None:
            return None
        return Intent(self.file(path), etag, status)

    # -- intents -----------------------------------------------------------------------------------
    def intent(self, path: str, not_found: NotFoundHandling | None = None) -> Intent | None:
        """What to do for the decoded ``path`` (``not_found`` overrides the configured one)."""
        handling = self.html_handling
        found = self._html(path, handling, skip_redirects=False)
        if found is not None:
            return found
        return self._not_found(path, self.not_found_handling if not_found is None else not_found)

    def _redirect(self, file: str, destination: str) -> Intent | None:
        """Redirect to ``destination`` if it is not itself an asset and serves ``file``."""
        if self.etag(destination) is not None:
            return None
        there = self._html(destination, self.html_handling, skip_redirects=True)
        if there is not None and there.etag is not None and there.etag == self.etag(file):
            return Intent(redirect=destination)
        return None

    def _first(self, *options: tuple[str, str]) -> Intent | None:
        for file, destination in options:
            found = self._redirect(file, destination)
            if found is not None:
                return found
        return None

    def _html(self, path: str, handling: HtmlHandling, *, skip_redirects: bool) -> Intent | None:
        exact = self._serve(path)
        if handling == "none":
            return exact
        redirect: _Redirect = _never if skip_redirects else self._first
        if handling == "auto-trailing-slash":
            found = self._auto(path, exact, redirect)
        elif handling == "force-trailing-slash":
            found = self._force(path, exact, redirect)
        else:
            found = self._drop(path, exact, redirect)
        return found

    def _auto(self, path: str, exact: Intent | None, redirect: _Redirect) -> Intent | None:
        if path.endswith("/index"):
            if exact is not None:
                return exact
            stem = path[: -len("/index")]
            found = redirect((f"{path}.html", f"{stem}/"), (f"{stem}.html", stem))
            if found is not None:
                return found
        elif path.endswith("/index.html"):
            stem = path[: -len("/index.html")]
            found = redirect((path, f"{stem}/"), (f"{stem}.html", stem))
            if found is not None:
                return found
        elif path.endswith("/"):
            index = self._serve(f"{path}index.html")
            if index is not None:
                return index
            found = redirect((f"{path[:-1]}.html", path[:-1]))
            if found is not None:
                return found
        elif path.endswith(".html"):
            stem = path[: -len(".html")]
            found = redirect((path, stem), (f"{stem}/index.html", f"{stem}/"))
            if found is not None:
                return found
        if exact is not None:
            return exact
        html = self._serve(f"{path}.html")
        if html is not None:
            return html
        return redirect((f"{path}/index.html", f"{path}/"))

    def _force(self, path: str, exact: Intent | None, redirect: _Redirect) -> Intent | None:
        if path.endswith("/index"):
            if exact is not None:
                return exact
            stem = path[: -len("/index")]
            found = redirect((f"{path}.html", f"{stem}/"), (f"{stem}.html", f"{stem}/"))
            if found is not None:
                return found
        elif path.endswith("/index.html"):
            stem = path[: -len("/index.html")]
            found = redirect((path, f"{stem}/"), (f"{stem}.html", f"{stem}/"))
            if found is not None:
                return found
        elif path.endswith("/"):
            for candidate in (f"{path}index.html", f"{path[:-1]}.html"):
                served = self._serve(candidate)
                if served is not None:
                    return served
        elif path.endswith(".html"):
            stem = path[: -len(".html")]
            found = redirect((path, f"{stem}/"))
            if found is not None:
                return found
            if exact is not None:
                return exact
            found = redirect((f"{stem}/index.html", f"{stem}/"))
            if found is not None:
                return found
        if exact is not None:
            return exact
        return redirect((f"{path}.html", f"{path}/"), (f"{path}/index.html", f"{path}/"))

    def _drop(self, path: str, exact: Intent | None, redirect: _Redirect) -> Intent | None:
        if path.endswith("/index"):
            if exact is not None:
                return exact
            if path == "/index":
                found = redirect(("/index.html", "/"))
            else:
                stem = path[: -len("/index")]
                found = redirect((f"{stem}.html", stem), (f"{path}.html", stem))
            if found is not None:
                return found
        elif path.endswith("/index.html"):
            if path == "/index.html":
                found = redirect(("/index.html", "/"))
                if found is not None:
                    return found
            else:
                stem = path[: -len("/index.html")]
                found = redirect((path, stem))
                if found is not None:
                    return found
                if exact is not None:
                    return exact
                found = redirect((f"{stem}.html", stem))
                if found is not None:
                    return found
        elif path.endswith("/"):
            if path == "/":
                index = self._serve("/index.html")
                if index is not None:
                    return index
            else:
                stem = path[:-1]
                found = redirect((f"{stem}.html", stem), (f"{stem}/index.html", stem))
                if found is not None:
                    return found
        elif path.endswith(".html"):
            stem = path[: -len(".html")]
            found = redirect((path, stem), (f"{stem}/index.html", stem))
            if found is not None:
                return found
        if exact is not None:
            return exact
        return self._serve(f"{path}.html") or self._serve(f"{path}/index.html")

    def _not_found(self, path: str, handling: NotFoundHandling) -> Intent | None:
        if handling == "single-page-application":
            return self._serve("/index.html")
        if handling == "404-page":
            folder = path
            while folder:
                folder = folder[: folder.rfind("/")]
                page = self._serve(f"{folder}/404.html", status=404)
                if page is not None:
                    return page
        return None
