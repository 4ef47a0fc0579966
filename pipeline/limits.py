"""The protocol's limits, in one place (sitemaps.org 0.9 and Google's extensions)."""

#: URLs in one sitemap file.
MAX_URLS_PER_SITEMAP = 50_000
#: Uncompressed bytes of one sitemap file (50 MiB).
MAX_BYTES_PER_SITEMAP = 52_428_800
#: Sitemaps listed by one sitemap index file.
MAX_SITEMAPS_PER_INDEX = 50_000
#: Characters of one <loc>, after percent-encoding.
MAX_URL_LENGTH = 2_048
#: Characters of a reject's `detail` (the value that caused it), at most: a long redirect
#: target or URL is cut there (sql/normalize_macros.sql's reject_detail cuts to the same).
MAX_REJECT_DETAIL = 300
#: Images listed for one URL (Google image extension).
MAX_IMAGES_PER_URL = 1_000
#: URLs in one news sitemap (Google news extension).
MAX_URLS_PER_NEWS_SITEMAP = 1_000

#: Allowed <changefreq> values.
CHANGEFREQ_VALUES = ("always", "hourly", "daily", "weekly", "monthly", "yearly", "never")
#: The DuckDB ENUM of those values: a changefreq written to Parquet from it is written from
#: one-byte codes, not from text (the file holds the text either way).
CHANGEFREQ_ENUM = f"ENUM({', '.join(repr(v) for v in CHANGEFREQ_VALUES)})"

#: The earliest believable <lastmod> (the web's first year); one before it (epoch, year 1,
#: -infinity) is dropped and counted as `lastmod_invalid`.
EARLIEST_LASTMOD = "1991-01-01T00:00:00Z"
#: A W3C datetime (a year, a month, a date, or a date and time with an optional zone);
#: DuckDB's own cast also takes "epoch", "infinity" and other words, which are not lastmods.
W3C_DATETIME_REGEX = (r"\d{4}(-\d{2}(-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?"
                      r"(Z|[+-]\d{2}(:?\d{2})?)?)?)?)?")
