"""Every normalisation and rejection rule, table-driven, and the SQL fast paths' agreement."""

from __future__ import annotations

import functools
import re
from urllib.parse import unquote, urlsplit

import duckdb
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pipeline import sql
from pipeline.errors import ConfigError
from pipeline.limits import MAX_REJECT_DETAIL, MAX_URL_LENGTH
from pipeline.urls import (
    CLEAN_URL_REGEX,
    IRI_PATH_REGEX,
    Site,
    check_url,
    normalize_url,
    reject_detail,
)

CASES = [
    # (raw, normalised or None, reason)
    ("https://www.example.com/a", "https://www.example.com/a", None),
    ("  https://www.example.com/a  ", "https://www.example.com/a", None),
    ("HTTPS://WWW.Example.COM/Path/Case", "https://www.example.com/Path/Case", None),
    ("https://www.example.com:443/a", "https://www.example.com/a", None),
    ("http://www.example.com:80/a", "http://www.example.com/a", None),
    ("https://www.example.com:8443/a", "https://www.example.com:8443/a", None),
    ("https://www.example.com/a#section", "https://www.example.com/a", None),
    ("https://www.example.com", "https://www.example.com/", None),
    ("https://bücher.example/x", "https://xn--bcher-kva.example/x", None),
    ("https://www.example.com/café", "https://www.example.com/caf%C3%A9", None),
    ("https://www.example.com/a b", "https://www.example.com/a%20b", None),
    ("https://www.example.com/%41%2f", "https://www.example.com/%41%2F", None),
    # percent-encoding case: one URL, one spelling
    ("https://www.example.com/caf%c3%a9", "https://www.example.com/caf%C3%A9", None),
    ("https://www.example.com/?q=%e6%97", "https://www.example.com/?q=%E6%97", None),
    # dot segments (RFC 3986 5.2.4), percent-encoded dots included
    ("https://www.example.com/a/../b", "https://www.example.com/b", None),
    ("https://www.example.com/a/./b/.", "https://www.example.com/a/b/", None),
    ("https://www.example.com/a/b/..", "https://www.example.com/a/", None),
    ("https://www.example.com/../../x", "https://www.example.com/x", None),
    ("https://www.example.com/a/%2e%2E/b", "https://www.example.com/b", None),
    ("https://www.example.com/a/.%2e/b", "https://www.example.com/b", None),
    ("https://www.example.com/a%2eb/...", "https://www.example.com/a.b/...", None),
    ("https://www.example.com/a/..?q=../x", "https://www.example.com/?q=../x", None),
    ("https://www.example.com/a?b=2&a=1", "https://www.example.com/a?b=2&a=1", None),
    ("https://www.example.com/?q=日本", "https://www.example.com/?q=%E6%97%A5%E6%9C%AC", None),
    ("https://www.example.com/<x>", "https://www.example.com/%3Cx%3E", None),
    (None, None, "empty"),
    ("", None, "empty"),
    ("   ", None, "empty"),
    ("https://www.example.com/a\x01", None, "illegal_char"),
    ("https://www.example.com/\ufffe", None, "illegal_char"),
    ("ftp://www.example.com/a", None, "not_http"),
    ("mailto:someone@example.com", None, "not_http"),
    ("/relative/path", None, "relative"),
    ("//www.example.com/a", None, "relative"),
    ("www.example.com/a", None, "relative"),
    (" p/1?x=é ", None, "relative"),
    ("1http://www.example.com/", None, "relative"),
    ("www.example.com:443/a", None, "not_http"),  # a scheme, by RFC 3986's grammar
    ("https:///nohost", None, "bad_host"),
    ("https://user:pw@www.example.com/", None, "bad_host"),
    ("https://www.example.com:99999/", None, "bad_host"),
    ("https://bad..host/", None, "bad_host"),
    ("https://www.example.com/%zz", None, "bad_percent_encoding"),
    ("https://www.example.com/100%", None, "bad_percent_encoding"),
    ("https://www.example.com/" + "a" * 2030, None, "too_long"),
    ("https://www.example.com/" + "é" * 700, None, "too_long"),  # long only once encoded
]


@pytest.mark.parametrize("raw, want, reason", CASES)
def test_normalize_url(raw: str | None, want: str | None, reason: str | None) -> None:
    assert normalize_url(raw) == (want, reason)


@pytest.mark.parametrize("raw, want", [
    ("https://ex.com/shop/a", "https://ex.com/shop/a"),
    ("https://ex.com/shop/", "https://ex.com/shop/"),
    ("https://ex.com/shop", "!off_site"),
    ("https://ex.com/shopping", "!off_site"),
    ("http://ex.com/shop/a", "!off_site"),
    ("https://www.ex.com/shop/a", "!off_site"),
    ("ftp://ex.com/shop/a", "!not_http"),
    ("/shop/a", "!relative"),
    ("https://ex.com/shop/../admin", "!off_site"),
    ("https://ex.com/shop/a/../../x", "!off_site"),
    ("https://ex.com/shop/%2e%2e/admin", "!off_site"),
    ("https://ex.com/shop/%2E%2E/admin", "!off_site"),
    ("https://ex.com/shop/./a", "https://ex.com/shop/a"),
    ("https://ex.com/shop/a/../b", "https://ex.com/shop/b"),
])
def test_check_url_against_site(raw: str, want: str) -> None:
    assert check_url(raw, Site.parse("https://ex.com/shop").prefix) == want


def test_site_parse() -> None:
    assert Site.parse("https://WWW.Example.com").prefix == "https://www.example.com/"
    with pytest.raises(ConfigError):
        Site.parse("not a url")
    with pytest.raises(ConfigError):
        Site.parse("https://ex.com/?q=1")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=40))
@example("\x85")  # NEL: Python's str.strip() would drop it, SQL would not
@example("a\u2028")
@example("\x9f/é")
@example("a/../b")
@example("./x")
@example("a/..")
@example("%2e%2e/x")
@example("a/%2E/b")
@example("%c3%a9")
@example("é/../x")
@example("a?q=%2e")
def test_fast_paths_agree_with_python(path: str) -> None:
    """What DuckDB accepts or encodes itself, Python would have produced the same way."""
    _agree(path)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("./a%2eEcC9é?")), max_size=16))
def test_fast_paths_agree_on_dots_and_escapes(path: str) -> None:
    """Paths made mostly of dots, slashes and escapes: where dot segments hide."""
    _agree(path)


#: What the macro gives where it leaves a URL to Python (the test's check_url).
_TO_PYTHON = "?python"


@functools.cache
def _macro() -> duckdb.DuckDBPyConnection:
    """sql/normalize_macros.sql with a check_url that only says it was called."""
    con = duckdb.connect()
    con.create_function("check_url", lambda u, p: _TO_PYTHON, ["VARCHAR", "VARCHAR"], "VARCHAR",
                        null_handling="special", side_effects=False)
    con.execute(sql.load_sql("normalize_macros"))
    return con


def _sql_answer(raw: str | None, prefix: str) -> str:
    """The macro's answer for `raw`, with normalize_inventory's length check after it."""
    (answer,) = _macro().execute(
        "SELECT normalized_url($u, $p, $c, $i, $m)", {
            "u": raw, "p": prefix, "c": CLEAN_URL_REGEX, "i": IRI_PATH_REGEX,
            "m": MAX_URL_LENGTH}).fetchone()  # type: ignore[misc]
    if not answer.startswith(("!", _TO_PYTHON)) and len(answer) > MAX_URL_LENGTH:
        return "!too_long"
    return str(answer)


def _agree(path: str, prefix: str = "https://www.example.com/") -> str:
    """Where SQL answers for `prefix + path`, it answers as Python; returns its answer."""
    return _agree_url(prefix + path, prefix)


def _agree_url(raw: str | None, prefix: str) -> str:
    answer = _sql_answer(raw, prefix)
    if answer != _TO_PYTHON:
        assert answer == check_url(raw, prefix), (raw, prefix)
        # render escapes only & and ' in <loc> (sql/url_line.sql, loc_escape)
        assert answer.startswith("!") or not any(c in answer for c in '<>"'), (raw, answer)
    return answer


SITES = ["https://www.example.com/", "https://www.example.com/shop/", "http://www.example.com/"]
URL_TEXT = st.text(alphabet=st.sampled_from(list("aZ09-._~!$&'()*+,;=:@/?#%2eEF é日\x01 <>\"")),
                   max_size=24)


@st.composite
def urls_on_and_off_site(draw: st.DrawFn) -> str:
    """A URL of some scheme and host, on the site or not, well-formed or not."""
    scheme = draw(st.sampled_from(["https", "http", "HTTPS", "ftp", "mailto", "", "http"]))
    sep = draw(st.sampled_from(["://", "://", ":", ""]))
    host = draw(st.sampled_from(["www.example.com", "elsewhere.example.org", "WWW.example.com",
                                 ".www.example.com", "a..b", "a.", "-", "bücher.example",
                                 "xn--bcher-kva.example", "www.example.com:443", "u@h", ""]))
    path = draw(st.sampled_from(["/", "/shop/", "", "/über-uns/"])) + draw(URL_TEXT)
    return scheme + sep + host + path


@settings(max_examples=500, deadline=None)
@given(urls_on_and_off_site(), st.sampled_from(SITES))
@example("https://elsewhere.example.org/help/789", SITES[0])  # off_site in SQL
@example("ftp://www.example.com/files/3330", SITES[0])  # not_http in SQL
@example("/files/3330", SITES[0])  # relative in SQL
@example("//www.example.com/files/3330", SITES[0])
@example("www.example.com/über", SITES[0])  # relative in Python
@example("1ftp:x", SITES[0])
@example("https://www.example.com/über-uns/a-1?color=red&size=m", SITES[0])  # encoded in SQL
@example("https://www.example.com/über?a=%2e", SITES[0])  # a query is kept as it is
@example("https://www.example.com/über-uns/o'neil-1", SITES[0])  # sub-delims stay
@example("https://www.example.com/ü(1)!$&*+,;=:@x/y", SITES[0])
@example('https://www.example.com/ü<b>"?q=<i>', SITES[0])  # never left in a <loc>
@example('https://www.example.com/a<b>"', SITES[0])
@example("https://www.example.com/über?a=%2E", SITES[0])
@example("https://.www.example.com/x", SITES[0])  # bad_host: Python
@example("https://a..b/x", SITES[0])
@example("HTTP://www.example.com/x", SITES[0])
@example("https:x", SITES[0])
@example("http", SITES[0])
@example("mailto:a@b.c", SITES[0])
@example("http://www.example.com/x", SITES[0])  # clean, another scheme: off_site
@example("https://www.example.com/shop", SITES[1])  # not under the site's path
def test_sql_answers_whole_urls_as_python_does(raw: str, prefix: str) -> None:
    """Schemes, hosts and paths on the site and off it: wherever the SQL macro answers
    itself, it answers as check_url."""
    _agree_url(raw, prefix)


def test_sql_answers_the_commonest_dirty_urls_without_python() -> None:
    """Off-site and non-http URLs and non-ASCII paths with a query never reach Python (each
    UDF call costs about 0.3 ms); bad hosts and anything not printable ASCII do."""
    prefix = SITES[0]
    for raw in ("https://elsewhere.example.org/help/789", "ftp://www.example.com/files/1",
                "mailto:someone@example.com", "https://www.example.com/über/a?x=1&y=%20",
                "https://www.example.com/über-uns/o'neil-1",
                "http://www.example.com/a"):
        assert _agree_url(raw, prefix) != _TO_PYTHON, raw
    for raw in ("https://.elsewhere.org/x", "https://a..b/x", "ftp://www.example.com/ü",
                " https://elsewhere.example.org/x", "HTTPS://ELSEWHERE.ORG/x",
                "https://www.example.com/über?q=ä", None):
        assert _sql_answer(raw, prefix) == _TO_PYTHON, raw


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_any_string_is_a_valid_loc_or_a_reason(raw: str) -> None:
    url, reason = normalize_url(raw)
    assert (url is None) != (reason is None)
    if url is not None:
        _assert_clean_loc(url)


def _assert_clean_loc(url: str) -> None:
    assert url.isascii() and len(url) <= 2048
    assert not any(c in url for c in '<>" \n\t{}|\\^`#')
    assert all(m.group() == m.group().upper() for m in re.finditer(r"%[0-9A-Fa-f]{2}", url))
    assert "%" not in re.sub(r"%[0-9A-F]{2}", "", url)
    assert normalize_url(url) == (url, None)  # normalising is idempotent


# URLs built from their parts, with hostile characters in every part that may hold them:
# each is valid by construction, so the property below is checked on every example.
HOSTILE = list("aZ09-._~!$&'()*+,;=:@ <>\"{}|\\^`[]éü日本\u00a0\u2028\U0001F600")
ESCAPES = ["%41", "%c3%a9", "%2F", "%20", "%7e", "%25"]
SEGMENT = st.lists(st.one_of(st.sampled_from(HOSTILE), st.sampled_from(ESCAPES)),
                   max_size=8).map("".join).filter(lambda s: unquote(s) not in (".", ".."))
HOSTS = {"www.example.com": "www.example.com", "WWW.Example.COM": "www.example.com",
         "bücher.example": "xn--bcher-kva.example", "xn--bcher-kva.example":
         "xn--bcher-kva.example", "a-b.c0.example": "a-b.c0.example"}


@st.composite
def built_urls(draw: st.DrawFn) -> tuple[str, str, str, str, str]:
    """(raw URL, scheme, host, path and query as written): scheme, host, port, path
    segments, query and fragment, each part drawn on its own."""
    scheme = draw(st.sampled_from(["http", "https", "HTTP", "hTTpS"]))
    host = draw(st.sampled_from(sorted(HOSTS)))
    port = draw(st.sampled_from(["", ":8080", ":443" if scheme.lower() == "https" else ":80"]))
    path = "/" + "/".join(draw(st.lists(SEGMENT, max_size=5)))
    query = draw(st.one_of(st.just(""), st.lists(SEGMENT, min_size=1, max_size=3).map(
        lambda parts: "=".join(parts) + "&x=/?")))
    fragment = draw(st.sampled_from(["", "#frag", "#a b<"]))
    raw = f"{scheme}://{host}{port}{path}" + (f"?{query}" if query else "") + fragment
    return raw, scheme.lower(), HOSTS[host] + (port if port == ":8080" else ""), path, query


@settings(max_examples=300, deadline=None)
@given(built_urls().filter(lambda b: not b[0][-1].isspace()))  # (a trailing blank is stripped)
@example(("http://WWW.Example.COM/%20", "http", "www.example.com", "/%20", ""))
def test_built_urls_are_accepted_and_mean_what_they_meant(built: tuple[str, ...]) -> None:
    raw, scheme, netloc, path, query = built
    url, reason = normalize_url(raw)
    assert reason is None and url is not None, (raw, reason)
    _assert_clean_loc(url)
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.fragment) == (scheme, netloc, "")
    # Only the spelling changes: decoded, path and query are the ones written.
    assert unquote(parts.path) == unquote(path or "/")
    assert unquote(parts.query) == unquote(query)
    assert check_url(raw, f"{scheme}://{netloc}/") == url
    assert check_url(raw, f"{scheme}://{netloc}/elsewhere/") in (url, "!off_site")


#: One fault put into a valid URL, and the reason it must be rejected for.
FAULTS = [
    (lambda u: u[:12] + "\x01" + u[12:], "illegal_char"),
    (lambda u: u[:12] + "\ufffe" + u[12:], "illegal_char"),
    (lambda u: u.replace("://", "://user@", 1), "bad_host"),
    (lambda u: u.replace("://", "://ex..", 1), "bad_host"),
    (lambda u: re.sub(r"^[A-Za-z]+", "ftp", u), "not_http"),
    (lambda u: re.sub(r"^[A-Za-z]+:", "", u), "relative"),
    (lambda u: re.sub(r"^([^/]*//[^/?#]*)", r"\1:99999", u), "bad_host"),
    (lambda u: re.sub(r"^([^/]*//[^/?#]*)", r"\1/%zz", u), "bad_percent_encoding"),
    (lambda u: re.sub(r"^([^/]*//[^/?#]*)", r"\1/" + "a" * 2048, u), "too_long"),
]


@settings(max_examples=200, deadline=None)
@given(built_urls(), st.sampled_from(range(len(FAULTS))))
def test_a_fault_in_a_built_url_is_rejected_for_its_reason(built: tuple[str, ...],
                                                           fault: int) -> None:
    spoil, reason = FAULTS[fault]
    raw = built[0]
    assert normalize_url(raw)[1] is None
    assert normalize_url(spoil(raw)) == (None, reason), spoil(raw)


@pytest.mark.parametrize(("raw", "detail"), [
    ("FTP://www.example.com/a", "scheme=FTP"),  # as given
    ("https://www.example.com/a\x07b", "char=U+0007"),
    ("https://www.example.com/a%g1", "escape=%g1"),
    ("https://www.example.com/" + "%C3%A9" * 400, f"length={24 + 6 * 400}"),
    ("https://Other.example.org:8443/shop/x", "host=other.example.org:8443"),
    ("http://www.example.com/shop/x", "scheme=http"),
    ("https://www.example.com/blog/x", "path=/blog/x"),
    ("https://www.example.com/shop/x/", None),  # published: no reason, no detail
])
def test_reject_detail_is_the_value_that_rejected_the_url(raw: str, detail: str | None) -> None:
    site = "https://www.example.com/shop/"
    reason = check_url(raw, site)
    assert reject_detail(reason[1:] if reason.startswith("!") else None, raw, site) == detail


def test_reject_detail_is_bounded_in_python_and_in_sql() -> None:
    raw = "https://o.example.org/" + "a" * 1000
    detail = reject_detail("off_site", "https://" + "h" * 1000 + ".org/", "https://e.com/")
    assert detail is not None and len(detail) == MAX_REJECT_DETAIL
    con = sql.connect(threads=1)
    con.create_function("check_url", lambda u, p: u, ["VARCHAR", "VARCHAR"], "VARCHAR")
    con.execute(sql.load_sql("normalize_macros"))
    [(cut,)] = con.execute("SELECT reject_detail('redirect_to', ?)", [raw]).fetchall()
    assert cut == "redirect_to=" + raw[:MAX_REJECT_DETAIL]
