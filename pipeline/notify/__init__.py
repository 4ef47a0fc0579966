"""Stage 6, notify (optional): tell crawlers and people that the sitemaps changed.

- `robots`: the `Sitemap:` lines of a site's robots.txt.
- `feed`: `feed.atom`, the Atom feed of recent changes, beside the root index.
- `indexnow`: submit a generation's changed URLs to IndexNow; publish the key file.
- `report`: the run report, one self-contained HTML page per generation.
- `step`: `notify_step`, which runs after publish (CLI and DAG alike) and returns small counts.
"""

from pipeline.layout import FEED_KEY
from pipeline.notify.feed import (
    ATOM_NS,
    DEFAULT_FEED_DAYS,
    DEFAULT_FEED_ENTRIES,
    atom_feed,
    feed_entries,
    recent_generations,
    write_feed,
)
from pipeline.notify.indexnow import (
    INDEXNOW_ENDPOINT,
    INDEXNOW_KEY_REGEX,
    INDEXNOW_MAX_URLS,
    check_indexnow_key,
    generation_changed_urls,
    indexnow_key_name,
    publish_indexnow_key,
    submit_indexnow,
)
from pipeline.notify.robots import (
    OWNED_NAMES,
    merge_robots,
    merged_robots,
    output_sitemap_urls,
    robots_for_output,
)
from pipeline.notify.step import notify_step

__all__ = [
    "ATOM_NS", "DEFAULT_FEED_DAYS", "DEFAULT_FEED_ENTRIES", "FEED_KEY", "INDEXNOW_ENDPOINT",
    "INDEXNOW_KEY_REGEX", "INDEXNOW_MAX_URLS", "OWNED_NAMES", "atom_feed", "check_indexnow_key",
    "feed_entries", "generation_changed_urls", "indexnow_key_name", "merge_robots",
    "merged_robots", "notify_step", "output_sitemap_urls", "publish_indexnow_key",
    "recent_generations", "robots_for_output", "submit_indexnow", "write_feed",
]
