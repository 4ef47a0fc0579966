"""URL normalisation and validation, one rule at a time.

`normalize_url` is the reference: the load stage sends it only the rows that
the SQL fast path (`CLEAN_URL_REGEX`) cannot prove clean, so most rows never
reach Python. Rules, in order (docs/operations.md lists them for users):

1. null, empty or blank -> `empty`; surrounding ASCII whitespace is stripped.
2. a control (C0, DEL, C1) or XML-illegal character -> `illegal_char`.
3. no scheme (a relative reference: `/p/1`, `//host/p`, `www.example.com/p`) -> `relative`;
   a scheme other than http/https -> `not_http`; scheme and host are lowercased.
4. no host, a bad port, user info, or a host IDNA cannot encode -> `bad_host`;
   an IDN host becomes punycode; the default port is dropped; the fragment too.
5. in path and query, non-ASCII and unsafe characters are percent-encoded
   (UTF-8), valid `%XX` kept with their hex digits uppercased (`%c3%a9` and
   `%C3%A9` are one URL); a `%` not followed by two hex digits ->
   `bad_percent_encoding`. In the path `%2E` is a dot, and dot segments (`.`,
   `..`, RFC 3986 5.2.4) are removed, so `/shop/../admin` is `/admin` before the
   site check. Path case and query order are kept; an empty path becomes `/`;
   an empty query (a bare trailing `?`) is dropped.
6. longer than 2,048 characters after encoding -> `too_long`.
7. not under the site URL (scheme, host, port and path prefix) -> `off_site`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from pipeline.errors import ConfigError
from pipeline.limits import MAX_REJECT_DETAIL, MAX_URL_LENGTH

#: Runs of characters that must be percent-encoded in a path (not RFC 3986 pchar, "/" or "%").
_PATH_UNSAFE = re.compile(r"[^A-Za-z0-9\-._~!$&'()*+,;=:@/%]+")
#: A query may also hold "?".
_QUERY_UNSAFE = re.compile(r"[^A-Za-z0-9\-._~!$&'()*+,;=:@/?%]+")
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_ILLEGAL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
#: Stripped from both ends (only ASCII whitespace: the SQL fast paths agree on it).
_BLANK = " \t\n\r\f\v"
_ASCII_HOST = re.compile(r"[a-z0-9-]+(\.[a-z0-9-]+)*\.?")
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: A URI's scheme and its colon (RFC 3986 3.1); a reference without one is relative.
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")

_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")


def _path_regex(char: str) -> str:
    """A path ("/" and segments) of `char`s and dots with no "." or ".." segment.

    RE2 has no lookahead: a segment is empty, or starts with a non-dot, or is one
    dot and a non-dot, or two dots and anything.
    """
    more = f"(?:{char}|\\.)"
    seg = f"(?:{char}{more}*|\\.{char}{more}*|\\.\\.{more}+)?"
    return f"/{seg}(?:/{seg})*"


#: A clean query: what CLEAN_URL_REGEX allows after the path.
_CLEAN_QUERY = r"(\?([A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-F]{2})+)?"

#: A URL matching this (and starting with the site prefix) is already normal:
#: lowercase ASCII host without port or user info, only safe characters, `%XX` in
#: uppercase and never `%2E` in the path, no dot segment, no fragment. DuckDB applies
#: it so that Python sees only the rest.
CLEAN_URL_REGEX = (
    r"https?://[a-z0-9.-]+"
    + _path_regex(r"(?:[A-Za-z0-9\-_~!$&'()*+,;=:@]|%(?:[013-9A-F][0-9A-F]|2[0-9A-DF]))")
    + _CLEAN_QUERY
)

#: A URL whose path holds only pchars but "%" (unreserved characters, sub-delims, ":" and
#: "@"), "/" and non-ASCII (no dot segment), with a clean query or none: DuckDB
#: percent-encodes its path's non-ASCII and keeps the rest, as normalize_url would
#: (sql/normalize_macros.sql, iri_path_encoded).
IRI_PATH_REGEX = r"https?://[a-z0-9.-]+" + _path_regex(
    r"[A-Za-z0-9\-_~!$&'()*+,;=:@\x{a0}-\x{fffd}\x{10000}-\x{10ffff}]") + _CLEAN_QUERY

#: Reason codes, the only values the rejects Parquet's `reason` column holds.
REASONS = (
    "empty", "illegal_char", "relative", "not_http", "bad_host", "bad_percent_encoding",
    "too_long", "off_site", "duplicate",
)


#: What to tell a user whose --site-url is rejected, by reason code.
SITE_URL_HINTS = {
    "empty": "it is empty; give the site, e.g. https://www.example.com/",
    "relative": "it has no scheme: it must start with https:// (or http://), e.g. "
                "https://www.example.com/",
    "not_http": "it must start with https:// (or http://), e.g. https://www.example.com/",
    "bad_host": "its host is missing or not valid, e.g. https://www.example.com/",
    "illegal_char": "it holds a control character",
    "bad_percent_encoding": "a % is not followed by two hex digits",
    "too_long": f"it is longer than {MAX_URL_LENGTH:,} characters",
}


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
            hint = SITE_URL_HINTS.get(reason or "", reason)
            raise ConfigError(f"--site-url {site_url!r} is not a usable URL: {hint}")
        parts = urlsplit(url)
        if parts.query:
            raise ConfigError(f"--site-url {site_url!r} must not have a query string")
        path = parts.path if parts.path.endswith("/") else parts.path + "/"
        return cls(parts.scheme, parts.netloc, path)


def _percent(match: re.Match[str]) -> str:
    raw = match.group().encode("utf-8").hex().upper()
    return "".join("%" + raw[i:i + 2] for i in range(0, len(raw), 2))


def _encode(text: str, unsafe: re.Pattern[str]) -> str | None:
    """Percent-encode what is `unsafe` (as UTF-8); None when a "%" is not a valid escape."""
    if "%" in text and _BAD_PERCENT.search(text):
        return None
    return unsafe.sub(_percent, text)


def _upper_percent(text: str) -> str:
    return _PERCENT.sub(lambda m: m.group().upper(), text) if "%" in text else text


def remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4 on an absolute path: "." and ".." segments resolved."""
    segments = path.split("/")[1:]
    out: list[str] = []
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg in (".", ".."):
            if seg == ".." and out:
                out.pop()
            if last:
                out.append("")  # "/a/.." is "/", "/a/." is "/a/"
        else:
            out.append(seg)
    return "/" + "/".join(out)


def _host(hostname: str) -> str | None:
    if not hostname or hostname.startswith(".") or ".." in hostname:
        return None
    if hostname.startswith("["):  # IPv6 literal, kept as written
        return hostname
    host = hostname.lower()
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return None
    return host if _ASCII_HOST.fullmatch(host) else None


def normalize_url(raw: str | None, max_length: int | None = MAX_URL_LENGTH
                  ) -> tuple[str | None, str | None]:
    """(normalised URL, None) or (None, reason code); site membership not checked.
    `max_length` None: no `too_long` (reject_detail measures such a URL)."""
    if raw is None:
        return None, "empty"
    text = raw.strip(_BLANK)
    if not text:
        return None, "empty"
    if _ILLEGAL.search(text):
        return None, "illegal_char"
    if not _SCHEME.match(text):  # RFC 3986: a reference without a scheme is relative
        return None, "relative"
    if text.partition(":")[0].lower() not in _DEFAULT_PORTS:
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
    path = _encode(parts.path or "/", _PATH_UNSAFE)
    query = _encode(parts.query, _QUERY_UNSAFE)
    if path is None or query is None:
        return None, "bad_percent_encoding"
    if not path.startswith("/"):
        path = "/" + path
    # One spelling per URL: "%c3" is "%C3", and "%2E" a dot, which may make a dot segment.
    path = remove_dot_segments(_upper_percent(path).replace("%2E", "."))
    query = _upper_percent(query)
    url = f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")
    if max_length is not None and len(url) > max_length:
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


def reject_detail(reason: str | None, raw: str | None, site_prefix: str) -> str | None:
    """The value that made the URL `raw` a reject of `reason`, as `name=value` (cut to
    MAX_REJECT_DETAIL characters): the scheme of `not_http`, the first illegal character
    of `illegal_char`, the bad escape of `bad_percent_encoding`, the encoded length of
    `too_long`, and of `off_site` the part of the normalised URL that is not the site's
    (its host, else its scheme, else its path). None for the other reasons: their value is
    the URL itself. Only rejected rows are measured (sql/rejected_rows.sql)."""
    text = (raw or "").strip(_BLANK)
    detail = None
    if reason == "not_http":
        detail = f"scheme={text.partition(':')[0]}"
    elif reason == "illegal_char" and (m := _ILLEGAL.search(text)):
        detail = f"char=U+{ord(m.group()):04X}"
    elif reason == "bad_percent_encoding" and (m := _BAD_PERCENT.search(text)):
        detail = f"escape={text[m.start():m.start() + 3]}"
    elif reason in ("too_long", "off_site"):
        url, _ = normalize_url(text, max_length=None)
        if url is None:
            return None
        if reason == "too_long":
            detail = f"length={len(url)}"
        else:
            parts, site = urlsplit(url), urlsplit(site_prefix)
            detail = (f"host={parts.netloc}" if parts.netloc != site.netloc
                      else f"scheme={parts.scheme}" if parts.scheme != site.scheme
                      else f"path={parts.path}")
    return None if detail is None else detail[:MAX_REJECT_DETAIL]
