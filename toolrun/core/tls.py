"""One TLS context per process for every httpx client toolrun makes.

Building a context loads the certificate bundle (about 40 ms of CPU each time); a provider
transport, an http tool and a batch each made their own, so a process running many runs
(a batch, the gateway, a library user) paid it again and again. The context depends only on
the certificate settings of the environment (``SSL_CERT_FILE``, ``SSL_CERT_DIR``, which httpx
reads), so it is shared per value of those.
"""

from __future__ import annotations

import os
import ssl
from functools import lru_cache


def shared_ssl_context() -> ssl.SSLContext:
    """The process's TLS context for the current certificate settings (verification on, as httpx makes it)."""
    return _context_for(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@lru_cache(maxsize=4)
def _context_for(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    import httpx  # only a client that speaks HTTP needs it

    return httpx.create_ssl_context()
