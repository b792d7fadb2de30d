"""OAuth for an MCP server that needs it: the SDK's ``DurableObjectOAuthClientProvider`` flow,
with everything it must remember in the agent's SQLite (table ``cf_agents_mcp_oauth``).

The flow is MCP's authorization spec (2025-11-25), OAuth 2.1 with PKCE, in steps that each
survive an eviction or a SIGKILL, because a browser sits between them:

1. the server answers ``401``: find its authorization server (RFC 9728 protected-resource
   metadata, named by ``WWW-Authenticate: … resource_metadata=…`` or at the well-known URL;
   then RFC 8414 / OpenID metadata), register a client dynamically (RFC 7591) unless one is
   stored for that issuer, make a PKCE verifier and a state ``<nonce>.<server id>``, store
   them, and answer the authorization URL (the connection is ``authenticating``);
2. the browser comes back to the callback route with ``code`` and ``state``: the state is
   checked against the stored one (once, within ten minutes, as the SDK's), the code is
   exchanged for tokens, which are stored;
3. every later connection sends ``Authorization: Bearer …``; a ``401`` with a refresh token
   refreshes once before the flow starts again.

Why not the official ``mcp`` SDK's ``OAuthClientProvider``: it is an ``httpx`` auth flow that
awaits the browser's callback *inside* one generator (``callback_handler()``), holding the PKCE
verifier and the state in memory — an agent is evicted between the two requests, and in a
Worker there is no ``httpx`` transport to drive it. The SDK's server side (authorization
server routes, token handler checking PKCE) is what the tests run against.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode, urlsplit

from workers import fetch

from ..errors import McpError

__all__ = ["OAUTH_SCHEMA", "STATE_TTL_SECONDS", "McpOAuth", "parse_state"]

OAUTH_SCHEMA = """CREATE TABLE IF NOT EXISTS cf_agents_mcp_oauth (
  server_id TEXT PRIMARY KEY NOT NULL,
  issuer TEXT,
  client TEXT,
  endpoints TEXT,
  tokens TEXT,
  nonce TEXT,
  verifier TEXT,
  created_at REAL
)"""

#: How long an authorization URL stays redeemable (the SDK's ``STATE_EXPIRATION_MS``).
STATE_TTL_SECONDS = 600.0
#: Seconds before ``expires_in`` ends that a token is treated as expired already.
_EXPIRY_MARGIN = 30.0

Sql = Callable[..., list[dict[str, Any]]]


def parse_state(state: str) -> tuple[str, str] | None:
    """``(nonce, server id)`` of an OAuth ``state`` (``<nonce>.<server id>``), or None."""
    nonce, dot, server_id = state.partition(".")
    return (nonce, server_id) if dot and nonce and server_id and "." not in server_id else None


def _challenge_param(header: str | None, name: str) -> str | None:
    """A parameter of a ``WWW-Authenticate`` challenge (quoted or bare)."""
    if not header:
        return None
    for part in header.replace("Bearer ", "", 1).split(","):
        key, eq, value = part.strip().partition("=")
        if eq and key.strip().lower() == name:
            return value.strip().strip('"')
    return None


async def _get_json(url: str) -> dict[str, Any] | None:
    """A metadata document, or None when there is none at ``url`` (4xx, not JSON)."""
    try:
        response = await fetch(url, method="GET", headers={"accept": "application/json"})
    except Exception as exc:
        raise McpError(f"OAuth metadata at {url} could not be fetched: {exc}") from exc
    text = await response.text()
    if int(response.status) != 200:
        return None
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


async def _post(url: str, body: str, headers: dict[str, str], what: str) -> dict[str, Any]:
    try:
        response = await fetch(url, method="POST", headers=headers, body=body)
    except Exception as exc:
        raise McpError(f"OAuth {what} at {url} could not be reached: {exc}") from exc
    text = await response.text()
    if int(response.status) not in (200, 201):
        raise McpError(f"OAuth {what} at {url} answered HTTP {response.status}: {text[:300]}")
    try:
        found = json.loads(text)
    except ValueError as exc:
        raise McpError(f"OAuth {what} at {url} answered no JSON: {text[:300]}") from exc
    if not isinstance(found, dict):
        raise McpError(f"OAuth {what} at {url} answered {found!r}")
    return found


def _well_known(base: str, name: str) -> list[str]:
    """RFC 8414 §3.1: the well-known name inserted before the path (then at the root)."""
    parts = urlsplit(base)
    origin, path = f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")
    urls = [f"{origin}/.well-known/{name}{path}"]
    if path:
        urls.append(f"{origin}/.well-known/{name}")
    return urls


class McpOAuth:
    """The OAuth client of one MCP server (module docstring); rows keyed by the server's id."""

    def __init__(
        self,
        sql: Sql,
        server_id: str,
        server_url: str,
        callback_url: str,
        *,
        client_name: str = "agents-python",
        now: Callable[[], float] = time.time,
    ) -> None:
        self._sql = sql
        self.server_id = server_id
        self.server_url = server_url
        self.callback_url = callback_url
        self.client_name = client_name
        self._now = now

    # -- the row ---------------------------------------------------------------------------------
    def _row(self) -> dict[str, Any]:
        rows = self._sql("SELECT * FROM cf_agents_mcp_oauth WHERE server_id = ?", self.server_id)
        return rows[0] if rows else {"server_id": self.server_id}

    def _set(self, **values: Any) -> None:
        self._sql("INSERT OR IGNORE INTO cf_agents_mcp_oauth (server_id) VALUES (?)",
                  self.server_id)  # fmt: skip
        names = ", ".join(f"{name} = ?" for name in values)
        self._sql(f"UPDATE cf_agents_mcp_oauth SET {names} WHERE server_id = ?",
                  *values.values(), self.server_id)  # fmt: skip

    def _json(self, column: str) -> dict[str, Any] | None:
        value = self._row().get(column)
        found = json.loads(value) if isinstance(value, str) and value else None
        return found if isinstance(found, dict) else None

    def forget(self) -> None:
        self._sql("DELETE FROM cf_agents_mcp_oauth WHERE server_id = ?", self.server_id)

    # -- tokens ----------------------------------------------------------------------------------
    def authorization(self) -> dict[str, str]:
        """The ``Authorization`` header of the stored access token (empty without one)."""
        tokens = self._json("tokens")
        token = (tokens or {}).get("access_token")
        return {"authorization": f"Bearer {token}"} if isinstance(token, str) and token else {}

    def can_refresh(self) -> bool:
        return bool((self._json("tokens") or {}).get("refresh_token"))

    async def refresh(self) -> bool:
        """Trade the refresh token for new tokens; False (tokens dropped) when refused."""
        tokens, client, endpoints = (
            self._json("tokens"),
            self._json("client"),
            self._json("endpoints"),
        )
        if not tokens or not tokens.get("refresh_token") or not client or not endpoints:
            return False
        form = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"],
                "resource": endpoints.get("resource") or self.server_url}  # fmt: skip
        try:
            answer = await self._token_request(endpoints["token_endpoint"], form, client)
        except McpError:
            self._set(tokens=None)
            return False
        answer.setdefault("refresh_token", tokens["refresh_token"])  # not rotated: keep it
        self._store_tokens(answer)
        return True

    def _store_tokens(self, answer: dict[str, Any]) -> None:
        if not isinstance(answer.get("access_token"), str):
            raise McpError(f"OAuth token endpoint answered without an access_token: {answer!r}")
        expires_in = answer.get("expires_in")
        if isinstance(expires_in, int | float):
            answer["expires_at"] = self._now() + float(expires_in) - _EXPIRY_MARGIN
        self._set(tokens=json.dumps(answer))

    # -- step 1: the authorization URL -------------------------------------------------------------
    def pending_auth_url(self) -> str | None:
        """The authorization URL still redeemable (a kill between the steps keeps it)."""
        row = self._row()
        endpoints, client = self._json("endpoints"), self._json("client")
        created = row.get("created_at")
        if not row.get("nonce") or not endpoints or not client or created is None:
            return None
        if self._now() - float(created) > STATE_TTL_SECONDS:
            return None
        return self._authorization_url(endpoints, client, row["nonce"], row["verifier"])

    async def begin(self, www_authenticate: str | None) -> str:
        """Discover, register if needed, store a PKCE verifier and a state: the URL to visit."""
        if not self.callback_url:
            raise McpError(
                f"MCP server {self.server_url} needs OAuth, but this server has no callback URL: "
                "add it from a request (the callback host comes from it) or pass callback_host"
            )
        endpoints = await self._discover(www_authenticate)
        client = self._json("client")
        if client is None or self._row().get("issuer") != endpoints["issuer"]:
            client = await self._register(endpoints)
        nonce = secrets.token_urlsafe(16).replace(".", "_")
        verifier = secrets.token_urlsafe(48)
        self._set(issuer=endpoints["issuer"], client=json.dumps(client),
                  endpoints=json.dumps(endpoints), nonce=nonce, verifier=verifier,
                  created_at=float(self._now()))  # fmt: skip
        return self._authorization_url(endpoints, client, nonce, verifier)

    async def _discover(self, www_authenticate: str | None) -> dict[str, Any]:
        named = _challenge_param(www_authenticate, "resource_metadata")
        resource = self.server_url
        issuer: str | None = None
        scopes: list[str] = []
        for url in [named] if named else _well_known(self.server_url, "oauth-protected-resource"):
            prm = await _get_json(url)
            if (
                prm
                and isinstance(prm.get("authorization_servers"), list)
                and prm["authorization_servers"]
            ):
                issuer = str(prm["authorization_servers"][0])
                resource = str(prm.get("resource") or resource)
                scopes = [str(s) for s in prm.get("scopes_supported") or []]
                break
        if issuer is None:  # the 2025-03-26 servers: the MCP server's origin is the issuer
            parts = urlsplit(self.server_url)
            issuer = f"{parts.scheme}://{parts.netloc}"
        metadata: dict[str, Any] | None = None
        for url in [*_well_known(issuer, "oauth-authorization-server"),
                    *_well_known(issuer, "openid-configuration")]:  # fmt: skip
            metadata = await _get_json(url)
            if metadata is not None:
                break
        base = issuer.rstrip("/")
        metadata = metadata or {}
        return {
            "issuer": str(metadata.get("issuer") or issuer),
            "authorization_endpoint": str(
                metadata.get("authorization_endpoint") or f"{base}/authorize"
            ),
            "token_endpoint": str(metadata.get("token_endpoint") or f"{base}/token"),
            "registration_endpoint": metadata.get("registration_endpoint") or f"{base}/register",
            "resource": resource,
            "scope": " ".join(scopes) or None,
        }

    async def _register(self, endpoints: dict[str, Any]) -> dict[str, Any]:
        """RFC 7591 dynamic client registration (the SDK's client metadata)."""
        parts = urlsplit(self.callback_url)
        metadata = {
            "client_name": self.client_name,
            "client_uri": f"{parts.scheme}://{parts.netloc}",
            "redirect_uris": [self.callback_url],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
        if endpoints.get("scope"):
            metadata["scope"] = endpoints["scope"]
        headers = {"content-type": "application/json"}
        url = str(endpoints["registration_endpoint"])
        client = await _post(url, json.dumps(metadata), headers, "client registration")
        if not isinstance(client.get("client_id"), str):
            raise McpError(f"OAuth client registration answered without a client_id: {client!r}")
        return client

    def _authorization_url(
        self, endpoints: dict[str, Any], client: dict[str, Any], nonce: str, verifier: str
    ) -> str:
        digest = hashlib.sha256(verifier.encode()).digest()
        params = {
            "response_type": "code",
            "client_id": client["client_id"],
            "redirect_uri": self.callback_url,
            "state": f"{nonce}.{self.server_id}",
            "code_challenge": base64.urlsafe_b64encode(digest).decode().rstrip("="),
            "code_challenge_method": "S256",
            "resource": endpoints["resource"],
        }
        if endpoints.get("scope"):
            params["scope"] = endpoints["scope"]
        return f"{endpoints['authorization_endpoint']}?{urlencode(params)}"

    # -- step 2: the callback -------------------------------------------------------------------
    def check_state(self, state: str) -> str | None:
        """Why ``state`` is not this server's pending one (None when it is); the SDK's texts."""
        parsed = parse_state(state)
        if parsed is None:
            return "Invalid state format"
        nonce, server_id = parsed
        row = self._row()
        if server_id != self.server_id:
            return "State serverId mismatch"
        if not row.get("nonce") or not secrets.compare_digest(str(row["nonce"]), nonce):
            return "State not found or already used"
        if self._now() - float(row.get("created_at") or 0) > STATE_TTL_SECONDS:
            self._set(nonce=None, verifier=None)
            return "State expired"
        return None

    def complete_failed(self) -> None:
        """The browser came back with an error: the pending state is consumed."""
        self._set(nonce=None, verifier=None)

    async def complete(self, code: str, state: str) -> None:
        """Exchange the callback's ``code`` for tokens (the state is consumed first)."""
        problem = self.check_state(state)
        if problem is not None:
            raise McpError(problem)
        row = self._row()
        endpoints, client = self._json("endpoints"), self._json("client")
        if not endpoints or not client:
            raise McpError("State not found or already used")
        verifier = str(row["verifier"])
        self._set(nonce=None, verifier=None)  # consumed: a replayed callback is refused
        form = {"grant_type": "authorization_code", "code": code,
                "redirect_uri": self.callback_url, "code_verifier": verifier,
                "resource": endpoints["resource"]}  # fmt: skip
        self._store_tokens(await self._token_request(endpoints["token_endpoint"], form, client))

    async def _token_request(
        self, url: str, form: dict[str, Any], client: dict[str, Any]
    ) -> dict[str, Any]:
        headers = {"content-type": "application/x-www-form-urlencoded",
                   "accept": "application/json"}  # fmt: skip
        form = {**form, "client_id": client["client_id"]}
        secret = client.get("client_secret")
        method = client.get("token_endpoint_auth_method") or (
            "client_secret_post" if secret else "none"
        )
        if secret and method == "client_secret_basic":
            pair = f"{client['client_id']}:{secret}".encode()
            headers["authorization"] = "Basic " + base64.b64encode(pair).decode()
        elif secret:
            form["client_secret"] = secret
        return await _post(url, urlencode(form), headers, "token request")
