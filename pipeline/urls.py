"""URL normalisation and validation, one rule at a time.

`normalize_url` is the reference: the load stage sends it only the rows that
the SQL fast path (`CLEAN_URL_REGEX`) cannot prove clean, so most rows never
reach Python. Rules, in order (the README lists them for users):

1. null, empty or blank -> `empty`; surrounding whitespace is stripped.
2. a control or XML-illegal character -> `illegal_char`.
3. scheme other than http/https -> `not_http`; scheme and host are lowercased.
4. no host, a bad port, user info, or a host IDNA cannot encode -> `bad_host`;
   an IDN host becomes punycode; the default port is dropped; the fragment too.
5. in path and query, non-ASCII and unsafe characters are percent-encoded
   (UTF-8), valid `%XX` kept as written; a `%` not followed by two hex digits
   -> `bad_percent_encoding`. Path case and query order are kept; an empty
   path becomes `/`.
6. longer than 2,048 characters after encoding -> `too_long`.
7. not under the site URL (scheme, host, port and path prefix) -> `off_site`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from pipeline.errors import ConfigError
from pipeline.limits import MAX_URL_LENGTH

#: Characters kept as they are in a path (RFC 3986 pchar and "/"); "%" is handled apart.
_PATH_SAFE = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/"
)
#: A query may also hold "?".
_QUERY_SAFE = _PATH_SAFE | {"?"}
_HEX = frozenset("0123456789abcdefABCDEF")
_ILLEGAL = re.compile("[\x00-\x1f\x7f\ud800-\udfff\ufffe\uffff]")
_DEFAULT_PORTS = {"http": 80, "https": 443}

#: A URL matching this (and starting with the site prefix) is already normal:
#: lowercase ASCII host without port or user info, only safe characters, no
#: "%", no fragment. DuckDB applies it so that Python sees only the rest.
CLEAN_URL_REGEX = (
    r"https?://[a-z0-9.-]+/[A-Za-z0-9\-._~!$&'()*+,;=:@/]*"
    r"(\?[A-Za-z0-9\-._~!$&'()*+,;=:@/?]*)?"
)

#: Reason codes, the only values the rejects Parquet's `reason` column holds.
REASONS = (
    "empty", "illegal_char", "not_http", "bad_host", "bad_percent_encoding",
    "too_long", "off_site", "duplicate",
)


@dataclass(frozen=True)
class Site:
    """The site every published URL must be on, normalised."""

    scheme: str
    netloc: str
    path: str

    @property
    def prefix(self) -> str:
        """`scheme://host[:port]/path/`: every published URL starts with it."""
        return f"{self.scheme}://{self.netloc}{self.path}"

    @classmethod
    def parse(cls, site_url: str) -> Site:
        url, reason = normalize_url(site_url)
        if url is None:
            raise ConfigError(f"--site-url {site_url!r} is not a usable URL ({reason})")
        parts = urlsplit(url)
        if parts.query:
            raise ConfigError(f"--site-url {site_url!r} must not have a query string")
        path = parts.path if parts.path.endswith("/") else parts.path + "/"
        return cls(parts.scheme, parts.netloc, path)


def _encode(text: str, safe: frozenset[str]) -> str | None:
    """Percent-encode what is not `safe`; None when a "%" is not a valid escape."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "%":
            if i + 2 < n and text[i + 1] in _HEX and text[i + 2] in _HEX:
                out.append(text[i:i + 3])
                i += 3
                continue
            return None
        if ch in safe:
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
        i += 1
    return "".join(out)


def _host(hostname: str) -> str | None:
    if not hostname or hostname.startswith(".") or ".." in hostname:
        return None
    if hostname.startswith("["):  # IPv6 literal, kept as written
        return hostname
    try:
        ascii_host = hostname.encode("idna").decode("ascii")
    except UnicodeError:
        return None
    ascii_host = ascii_host.lower()
    if not re.fullmatch(r"[a-z0-9-]+(\.[a-z0-9-]+)*\.?", ascii_host):
        return None
    return ascii_host


def normalize_url(raw: str | None) -> tuple[str | None, str | None]:
    """(normalised URL, None) or (None, reason code); site membership not checked."""
    if raw is None:
        return None, "empty"
    text = raw.strip()
    if not text:
        return None, "empty"
    if _ILLEGAL.search(text):
        return None, "illegal_char"
    scheme, sep, _ = text.partition(":")
    if not sep or scheme.lower() not in _DEFAULT_PORTS:
        return None, "not_http"
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return None, "bad_host"
    if "@" in parts.netloc or parts.hostname is None:
        return None, "bad_host"
    raw_host = parts.netloc.rsplit(":", 1)[0] if parts.netloc.count(":") == 1 else parts.netloc
    if raw_host.startswith("["):
        raw_host = parts.netloc.split("]")[0] + "]"
    host = _host(raw_host if raw_host.startswith("[") else raw_host.lower())
    if host is None:
        return None, "bad_host"
    scheme = parts.scheme.lower()
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    path = _encode(parts.path or "/", _PATH_SAFE)
    query = _encode(parts.query, _QUERY_SAFE)
    if path is None or query is None:
        return None, "bad_percent_encoding"
    if not path.startswith("/"):
        path = "/" + path
    url = f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")
    if len(url) > MAX_URL_LENGTH:
        return None, "too_long"
    return url, None


def check_url(raw: str | None, site_prefix: str) -> str:
    """The normalised URL, or "!reason" when the row is rejected (the SQL UDF's contract)."""
    url, reason = normalize_url(raw)
    if url is None:
        return "!" + str(reason)
    if not url.startswith(site_prefix):
        return "!off_site"
    return url
