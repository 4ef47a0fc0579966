"""Google's sitemap extensions: images, videos, news and hreflang alternates.

The load stage asks `extension_columns` for SQL expressions (code constants,
chosen by the inventory's column and struct field names) that render each
row's extension XML; the diff stage adds the news element, which depends on
the run's time. Namespaces are declared only in files that use them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.errors import InventoryError
from pipeline.limits import MAX_IMAGES_PER_URL

#: News articles older than this (days, against the run's time) leave the news sitemaps.
NEWS_MAX_AGE_DAYS = 2
#: The section that holds the news sitemaps (at most 1,000 URLs per file).
NEWS_SECTION = "google-news"

#: The XSDs' facets (pipeline/schemas/) for the fields written: a value that fails one
#: leaves out its element (counted in extension_fields_invalid), or the whole entry when the
#: element is required (counted in images_dropped, videos_dropped, news_dropped).
#: Lengths are of the text as given, before xml_text removes control characters: a value
#: that passes is never longer once cleaned and parsed.
VIDEO_TITLE_MAX_CHARS = 100  # sitemap-video.xsd, video:title maxLength
VIDEO_DESCRIPTION_MAX_CHARS = 2_048  # video:description maxLength
VIDEO_DURATION_SECONDS = (1, 28_800)  # video:duration maxInclusive; Google: at least 1
VIDEO_RATING_RANGE = (0, 5)  # video:rating, a decimal, minInclusive and maxInclusive
#: video:expiration_date and publication_date, news:publication_date: xsd:date or dateTime,
#: written as UTC; a four-digit year (DuckDB's infinities and years past 9999 are not dates).
EXT_TIME_RANGE = ("0001-01-01 00:00:00+00", "9999-12-31 23:59:59+00")
#: news:language's pattern (sitemap-news.xsd): ISO 639 codes, zh-cn and zh-tw.
NEWS_LANGUAGE_REGEX = "zh-cn|zh-tw|[a-z]{2,3}"
#: hreflang (no XSD; Google's rule): ISO 639 language, optional ISO 15924 script and ISO
#: 3166-1 region (or a UN M.49 number), or x-default. An empty value is not one.
HREFLANG_REGEX = "x-default|[A-Za-z]{2,3}(-[A-Za-z]{4})?(-([A-Za-z]{2}|[0-9]{3}))?"

_IMAGE_FIELDS = ("loc", "caption", "geo_location", "title", "license")  # XSD order
#: Tags Google stopped using in 2022 ("Simplifying our sitemap extensions"): left out
#: unless the run keeps them (--keep-deprecated-tags), and counted as deprecated_tags.
DEPRECATED_IMAGE_FIELDS = ("caption", "geo_location", "title", "license")
#: Video fields of tags Google stopped using; never written (count only). allow_embed and
#: autoplay are player_loc's attributes, given as fields of the video struct.
DEPRECATED_VIDEO_FIELDS = ("category", "gallery_loc", "price", "tvshow", "allow_embed",
                           "autoplay")
_VIDEO_TEXT = ("thumbnail_loc", "title", "description", "content_loc", "player_loc")
_VIDEO_LATER = ("duration", "expiration_date", "rating", "view_count", "publication_date",
                "family_friendly")


def _fields(duck_type: Any, column: str, *, list_of: bool) -> set[str]:
    t = duck_type
    if list_of:
        if t.id != "list":
            raise InventoryError(f"the inventory's `{column}` column is {t}; it must be a list "
                                 "of structs")
        t = t.children[0][1]
    if t.id != "struct":
        raise InventoryError(f"the inventory's `{column}` column is {t}; it must hold structs")
    return {name for name, _ in t.children}


def _opt(var: str, field: str, present: set[str], element: str, value: str | None = None) -> str:
    """The element for one struct field, left out when NULL; text is cleaned (xml_text)."""
    if field not in present:
        return ""
    v = value or f"xml_text({var}.{field}::VARCHAR)"
    return f" || coalesce('<{element}>' || {v} || '</{element}>', '')"


def _url(var: str, field: str) -> str:
    """A URL field, NULL unless a valid absolute http(s) URL (ext_url, sql/url_line.sql)."""
    return f"ext_url({var}.{field}::VARCHAR)"


def _time(expr: str) -> str:
    """A W3C datetime of `expr`, NULL unless a time within EXT_TIME_RANGE."""
    lo, hi = EXT_TIME_RANGE
    t = f"try_cast({expr} AS TIMESTAMPTZ)"
    return (f"CASE WHEN {t} BETWEEN TIMESTAMPTZ '{lo}' AND TIMESTAMPTZ '{hi}' "
            f"THEN w3c_time({t}) END")


def _invalid_count(var: str, items: str, checks: list[tuple[str, str]]) -> str:
    """How many of the (field, value) pairs are set but their value NULL (fails its facet),
    over the `items` written: elements left out."""
    if not checks:
        return "0"
    bad = " + ".join(f"({var}.{f} IS NOT NULL AND ({v}) IS NULL)::INTEGER" for f, v in checks)
    return f"coalesce(list_sum(list_transform({items}, lambda {var}: {bad})), 0)"


def image_xml(present: set[str], keep_deprecated: bool = False) -> tuple[str, str, str, str]:
    """(XML of the first 1,000 images, count of images dropped, count of deprecated tags
    left out, count of fields left out as invalid) for `images`."""
    if "loc" not in present:
        raise InventoryError("the inventory's `images` structs need a `loc` field")
    written = [f for f in _IMAGE_FIELDS if keep_deprecated or f not in DEPRECATED_IMAGE_FIELDS]
    # loc and license are xsd:anyURI; caption, geo_location and title any string
    urls = {f: _url("i", f) for f in ("loc", "license")}
    body = "'<image:image>'" + "".join(
        _opt("i", f, present, f"image:{f}",
             f"xml_escape({urls[f]})" if f in urls else None)
        for f in written) + " || '</image:image>'"
    # An image without a valid loc (missing, javascript:, relative) is dropped and counted.
    kept = f"list_filter(images, lambda i: {_url('i', 'loc')} IS NOT NULL)[1:{MAX_IMAGES_PER_URL}]"
    xml = f"coalesce(array_to_string(list_transform({kept}, lambda i: {body}), ''), '')"
    dropped = (f"coalesce(len(images) - len({kept}), 0)")
    invalid = [("license", urls["license"])] if "license" in written and "license" in present else []
    return xml, dropped, _deprecated_count(
        "i", kept, [f for f in DEPRECATED_IMAGE_FIELDS
                              if f in present and f not in written]), _invalid_count(
        "i", kept, invalid)


def _deprecated_count(var: str, items: str, fields: list[str]) -> str:
    """How many of `fields` are set over the `items` written: tags left out."""
    if not fields:
        return "0"
    setc = " + ".join(f"({var}.{f} IS NOT NULL)::INTEGER" for f in fields)
    return f"coalesce(list_sum(list_transform({items}, lambda {var}: {setc})), 0)"


def _video_value(field: str) -> str:
    """The text of an optional video field, NULL when it fails its XSD type or facet."""
    lo, hi = VIDEO_DURATION_SECONDS
    if field.endswith("_loc"):
        return f"xml_escape({_url('v', field)})"
    if field == "duration":
        return (f"CASE WHEN try_cast(v.duration AS INTEGER) BETWEEN {lo} AND {hi} "
                "THEN try_cast(v.duration AS INTEGER)::VARCHAR END")
    if field in ("expiration_date", "publication_date"):
        return _time(f"v.{field}")
    if field == "rating":  # a decimal (never 1e-07 nor nan), to the thousandth
        r = "try_cast(v.rating AS DOUBLE)"
        return (f"CASE WHEN {r} BETWEEN {VIDEO_RATING_RANGE[0]} AND {VIDEO_RATING_RANGE[1]} "
                f"THEN priority_printed({r}) END")
    if field == "view_count":  # xsd:nonNegativeInteger
        return "try_cast(v.view_count AS UBIGINT)::VARCHAR"
    if field == "family_friendly":  # yes or no; unset is left out, not "no"
        b = "try_cast(v.family_friendly AS BOOLEAN)"
        return f"CASE WHEN {b} THEN 'yes' WHEN NOT {b} THEN 'no' END"
    return f"xml_text(v.{field}::VARCHAR)"


def video_xml(present: set[str], keep_deprecated: bool = False) -> tuple[str, str, str, str]:
    """(XML of the valid videos, count dropped for lacking a valid required field, count of
    deprecated tags left out (always: this writer never had them), count of optional
    fields left out as invalid)."""
    need = {"thumbnail_loc", "title", "description"}
    if not need <= present or not {"content_loc", "player_loc"} & present:
        raise InventoryError("the inventory's `videos` structs need thumbnail_loc, title, "
                             "description and content_loc or player_loc")
    either = " OR ".join(f"{_url('v', f)} IS NOT NULL" for f in ("content_loc", "player_loc")
                         if f in present)
    # A video without a valid thumbnail, title, description and content or player URL is
    # dropped and counted; a bad optional field (a duration of "abc") is left out alone.
    valid = (f"list_filter(videos, lambda v: {_url('v', 'thumbnail_loc')} IS NOT NULL AND "
             f"length(v.title::VARCHAR) <= {VIDEO_TITLE_MAX_CHARS} AND "
             f"length(v.description::VARCHAR) <= {VIDEO_DESCRIPTION_MAX_CHARS} AND ({either}))")
    optional = [f for f in (*_VIDEO_TEXT, *_VIDEO_LATER)
                if f in present and f not in ("thumbnail_loc", "title", "description")]
    body = "'<video:video>'" + "".join(
        _opt("v", f, present, f"video:{f}",
             _video_value(f) if f not in ("title", "description") else None)
        for f in (*_VIDEO_TEXT, *_VIDEO_LATER)) + " || '</video:video>'"
    xml = f"coalesce(array_to_string(list_transform({valid}, lambda v: {body}), ''), '')"
    return xml, f"coalesce(len(videos) - len({valid}), 0)", _deprecated_count(
        "v", valid, [f for f in DEPRECATED_VIDEO_FIELDS if f in present]), _invalid_count(
        "v", valid, [(f, _video_value(f)) for f in optional])


def alternates_xml(present: set[str], keep_deprecated: bool = False) -> tuple[str, str, str, str]:
    """(hreflang links, 1 when dropped because the URL is not among its own alternates,
    0 deprecated tags, count of alternates left out for an invalid hreflang or href)."""
    if not {"hreflang", "href"} <= present:
        raise InventoryError("the inventory's `alternates` structs need hreflang and href")
    # An alternate whose hreflang is not a language tag (HREFLANG_REGEX), or whose href is
    # not a valid absolute http(s) URL, is left out and counted.
    valid = (f"list_filter(alternates, lambda a: regexp_full_match(a.hreflang::VARCHAR, "
             f"'{HREFLANG_REGEX}') AND {_url('a', 'href')} IS NOT NULL)")
    lists_self = f"list_contains(list_transform({valid}, lambda a: a.href), url)"
    link = ("'<xhtml:link rel=\"alternate\" hreflang=\"' || xml_text(a.hreflang) || "
            "'\" href=\"' || xml_escape(a.href) || '\"/>'")
    xml = (f"CASE WHEN {lists_self} THEN array_to_string(list_transform({valid}, "
           f"lambda a: {link}), '') ELSE '' END")
    dropped = f"CASE WHEN len({valid}) > 0 AND NOT {lists_self} THEN 1 ELSE 0 END"
    invalid = (f"coalesce(len(list_filter(alternates, lambda a: a IS NOT NULL))"
               f" - len({valid}), 0)")
    return xml, dropped, "0", invalid


def news_columns(present: set[str]) -> list[str]:
    """The news struct's fields as columns, for the diff stage (which knows the run time),
    and news_dropped: 1 when the row gives an article with a required field missing or
    failing its facet (a language of en-US), which is then never written."""
    need = {"publication_name", "language", "publication_date", "title"}
    if not need <= present:
        raise InventoryError("the inventory's `news` struct needs publication_name, language, "
                             "publication_date and title")
    lo, hi = EXT_TIME_RANGE
    date = "try_cast(news.publication_date AS TIMESTAMPTZ)"
    language = (f"CASE WHEN regexp_full_match(news.language::VARCHAR, '{NEWS_LANGUAGE_REGEX}') "
                "THEN news.language::VARCHAR END")
    date_ok = f"CASE WHEN {date} BETWEEN TIMESTAMPTZ '{lo}' AND TIMESTAMPTZ '{hi}' THEN {date} END"
    return ["news.publication_name::VARCHAR AS news_name",
            f"{language} AS news_language",
            f"{date_ok} AS news_date",
            "news.title::VARCHAR AS news_title",
            f"(news IS NOT NULL AND (news.publication_name IS NULL OR ({language}) IS NULL "
            f"OR ({date_ok}) IS NULL OR news.title IS NULL))::INTEGER AS news_dropped"]


def extension_columns(types: dict[str, Any], keep_deprecated: bool = False) -> list[str]:
    """Column expressions for the typed inventory view: ext_xml, drop counts, news fields.

    `keep_deprecated`: write the image tags Google no longer uses (DEPRECATED_IMAGE_FIELDS).
    """
    xml, cols, deprecated, invalid = [], [], [], []
    for ext in EXTENSIONS:
        if ext.render is None or ext.dropped is None:
            continue  # news: rendered by the diff, which knows the run's time
        if ext.column in types:
            part, dropped, left_out, bad = ext.render(
                _fields(types[ext.column], ext.column, list_of=True), keep_deprecated)
            xml.append(part)
            cols.append(f"{dropped} AS {ext.dropped}")
            deprecated.append(left_out)
            invalid += [bad] if bad != "0" else []
        else:
            cols.append(f"0 AS {ext.dropped}")
    cols.append(f"{' || '.join(xml) if xml else chr(39) * 2} AS ext_xml")
    cols.append(f"{' + '.join(deprecated) if deprecated else '0'} AS deprecated_tags")
    cols.append(f"{' + '.join(invalid) if invalid else '0'} AS extension_fields_invalid")
    if "news" in types:
        cols += news_columns(_fields(types["news"], "news", list_of=False))
    else:
        cols += ["NULL::VARCHAR AS news_name", "NULL::VARCHAR AS news_language",
                 "NULL::TIMESTAMPTZ AS news_date", "NULL::VARCHAR AS news_title",
                 "0 AS news_dropped"]
    return cols


#: Constant columns of load (pipeline.load.constant_columns): an inventory without extension
#: XML, and one without news articles.
NO_EXTENSION_XML = "'' AS ext_xml"
NO_NEWS = "NULL::TIMESTAMPTZ AS news_date"


def ext_always_empty(constant_columns: Sequence[str]) -> bool:
    """Whether load's constant columns say no row has extension XML (diff_rows' `ext` is ''
    in every row): plan's sort then carries no `ext` (sql/planned_rows.sql)."""
    return NO_EXTENSION_XML in constant_columns and NO_NEWS in constant_columns


#: (struct fields present, keep deprecated tags) -> SQL of (the XML, items dropped, deprecated
#: tags left out, elements left out as invalid), for one row.
Renderer = Callable[[set[str], bool], tuple[str, str, str, str]]


@dataclass(frozen=True)
class Extension:
    """One sitemap extension: where it comes from and what shows a line uses it."""

    #: The inventory's column (a list of structs; news: one struct).
    column: str
    #: The XML namespace prefix, and its URI, declared only in files whose lines use it.
    prefix: str
    namespace: str
    #: The element every line that uses the namespace contains (plan's `ns` flags,
    #: sql/assigned_rows.sql: bit i is EXTENSIONS[i]).
    marker: str
    #: The load stage's renderer (None: news, which the diff renders) and the column that
    #: counts the items it dropped (normalize_inventory passes it on; classified_counts
    #: sums it).
    render: Renderer | None = None
    dropped: str | None = None


#: Every extension, in the order of their namespace bits and of the XML in a <url> line.
#: A new extension: its renderer above and one entry here (a drop counter is also summed,
#: and named for the report, in sql/classified_counts.sql).
EXTENSIONS = (
    Extension("images", "image", "http://www.google.com/schemas/sitemap-image/1.1",
              "<image:image>", image_xml, "images_dropped"),
    Extension("videos", "video", "http://www.google.com/schemas/sitemap-video/1.1",
              "<video:video>", video_xml, "videos_dropped"),
    Extension("news", "news", "http://www.google.com/schemas/sitemap-news/0.9", "<news:news>"),
    Extension("alternates", "xhtml", "http://www.w3.org/1999/xhtml", "<xhtml:link ",
              alternates_xml, "alternates_dropped"),
)
NAMESPACES = {e.prefix: e.namespace for e in EXTENSIONS}
#: Namespace prefixes by bit of the `ns` flags, and the markers the SQL looks for.
NAMESPACE_BITS = tuple(e.prefix for e in EXTENSIONS)
NAMESPACE_MARKERS = [e.marker for e in EXTENSIONS]
