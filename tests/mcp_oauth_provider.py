"""An OAuth authorization server for the MCP OAuth tests, on the official ``mcp`` SDK's pieces.

:class:`AutoConsentProvider` implements the SDK's ``OAuthAuthorizationServerProvider``: the
SDK's own routes (``create_auth_routes``, mounted by ``MCPServer(auth_server_provider=…)``)
serve RFC 8414 metadata, dynamic client registration (RFC 7591), ``/authorize`` and ``/token``
— and the SDK's token handler checks the PKCE verifier and the redirect URI itself. Only the
user's consent is short-circuited: ``/authorize`` redirects straight back to the client's
``redirect_uri`` with a code (what a browser would reach after the user clicks "allow").

Everything is kept in memory, so a test can count from outside what the client did
(``registrations``, ``authorizations``, ``exchanges``, ``refreshes``) and revoke tokens.
"""

from __future__ import annotations

import secrets
import time

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

__all__ = ["AutoConsentProvider"]

#: Seconds an access token lives (long: the tests never wait for one to expire).
_TOKEN_LIFETIME = 3600


class AutoConsentProvider:
    """The SDK's provider protocol, in memory, consent granted at once (module docstring)."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.registrations = self.authorizations = self.exchanges = self.refreshes = 0

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.registrations += 1
        self.clients[client_info.client_id] = client_info

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        self.authorizations += 1
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id or "",
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        found = self.codes.get(authorization_code)
        return found if found is not None and found.client_id == client.client_id else None

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        self.exchanges += 1
        return self._issue(client.client_id or "", authorization_code.scopes,
                           authorization_code.resource)  # fmt: skip

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        found = self.refresh.get(refresh_token)
        return found if found is not None and found.client_id == client.client_id else None

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)
        self.refreshes += 1
        return self._issue(client.client_id or "", scopes or refresh_token.scopes,
                           refresh_token.resource)  # fmt: skip

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def revoke_access_tokens(self) -> None:
        """Forget every access token (refresh tokens stay): the next call must refresh."""
        self.access.clear()

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        expires = int(time.time()) + _TOKEN_LIFETIME
        self.access[access] = AccessToken(token=access, client_id=client_id, scopes=scopes,
                                          expires_at=expires, resource=resource)  # fmt: skip
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes,
                                             resource=resource)  # fmt: skip
        return OAuthToken(access_token=access, expires_in=_TOKEN_LIFETIME,
                          scope=" ".join(scopes) or None, refresh_token=refresh)  # fmt: skip
