"""Digests for cache keys, cache files and module names, without ``import hashlib``.

Importing ``hashlib`` sets up OpenSSL's digest constructors: 1-2 ms, one to two percent of a
short command such as a replayed recipe, which needs no digest OpenSSL has to give. BLAKE2b is
CPython's own code either way (``hashlib.blake2b`` is ``_blake2.blake2b``), so it is taken from
there; an interpreter without that module gets it from ``hashlib`` as usual.
"""

from __future__ import annotations

try:
    from _blake2 import blake2b
except ImportError:  # not CPython: hashlib has it on every Python
    from hashlib import blake2b

__all__ = ["blake2b", "hex_key"]


def hex_key(text: str, length: int = 24) -> str:
    """``length`` hex digits naming ``text`` (a folder's path, say) in a file name."""
    return blake2b(text.encode("utf-8", "surrogatepass"), digest_size=(length + 1) // 2).hexdigest()[:length]
