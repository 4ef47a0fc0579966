"""The protocol's limits, in one place (sitemaps.org 0.9 and Google's extensions)."""

#: URLs in one sitemap file.
MAX_URLS_PER_SITEMAP = 50_000
#: Uncompressed bytes of one sitemap file (50 MiB).
MAX_BYTES_PER_SITEMAP = 52_428_800
#: Sitemaps listed by one sitemap index file.
MAX_SITEMAPS_PER_INDEX = 50_000
#: Characters of one <loc>, after percent-encoding.
MAX_URL_LENGTH = 2_048
#: Images listed for one URL (Google image extension).
MAX_IMAGES_PER_URL = 1_000
#: URLs in one news sitemap (Google news extension).
MAX_URLS_PER_NEWS_SITEMAP = 1_000

#: Allowed <changefreq> values.
CHANGEFREQ_VALUES = ("always", "hourly", "daily", "weekly", "monthly", "yearly", "never")
