"""The server as an OAuth protected resource (RFC 9728): the metadata a client reads to find the issuer.

A client refused with 401 reads ``WWW-Authenticate: Bearer resource_metadata="…"``, fetches
that document, and asks the authorization server it names for a token whose audience is
``resource``. The document is public and carries no tool names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import urlsplit

from toolrun.mcp.oidc_rules import OidcSettings

WELL_KNOWN_PATH = "/.well-known/oauth-protected-resource"


@dataclass(frozen=True)
class ProtectedResource:
    """The resource identifier (``resource_url``) and the issuer whose tokens it takes."""

    resource: str
    issuer: str

    @classmethod
    def of(cls, oidc: OidcSettings, resource_url: str | None) -> ProtectedResource:
        return cls(resource_url or oidc.audience, oidc.issuer)

    def paths(self) -> set[str]:
        """Where the document is served: the RFC's path for this resource, and the bare well-known path."""
        path = urlsplit(self.resource).path.rstrip("/")
        return {WELL_KNOWN_PATH, WELL_KNOWN_PATH + path}

    def metadata_url(self) -> str:
        """The document's URL as RFC 9728 forms it: the well-known path between the host and the resource's path."""
        parts = urlsplit(self.resource)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return WELL_KNOWN_PATH  # an audience that is no URL: the client resolves it against the server
        return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN_PATH}{parts.path.rstrip('/')}"

    def document(self) -> bytes:
        return json.dumps({"resource": self.resource, "authorization_servers": [self.issuer],
                           "bearer_methods_supported": ["header"], "resource_name": "toolrun"}).encode("utf-8")

    def challenge(self, *, invalid_token: bool) -> bytes:
        """The ``WWW-Authenticate`` value of a 401: where the metadata is, and whether the token was bad (RFC 6750)."""
        error = ', error="invalid_token"' if invalid_token else ""
        return f'Bearer realm="toolrun", resource_metadata="{self.metadata_url()}"{error}'.encode("latin-1", "replace")
