"""The shrink guard (publish.check_shrink), a pure function of the live manifest's count,
the new count, the threshold and --allow-shrink."""

from __future__ import annotations

import pytest

from pipeline.errors import ShrinkRefused
from pipeline.publish import LiveState, check_shrink


def live(published: int) -> LiveState:
    return LiveState({"generation": "g", "counts": {"published": published}}, '"etag"')


@pytest.mark.parametrize("published", [900, 901, 1000, 5000])
def test_a_shrink_within_the_threshold_passes(published: int) -> None:
    check_shrink(live(1000), published, 0.10, allow_shrink=False)


@pytest.mark.parametrize("published", [1, 500, 899])
def test_a_shrink_past_the_threshold_is_refused(published: int) -> None:
    with pytest.raises(ShrinkRefused, match=f"{published:,} URLs against 1,000 live"):
        check_shrink(live(1000), published, 0.10, allow_shrink=False)


def test_allow_shrink_lets_any_non_empty_generation_through() -> None:
    check_shrink(live(1000), 1, 0.10, allow_shrink=True)


@pytest.mark.parametrize("allow", [False, True])
def test_an_empty_generation_is_refused_even_when_allowed(allow: bool) -> None:
    with pytest.raises(ShrinkRefused, match="no URL at all"):
        check_shrink(live(1000), 0, 0.10, allow_shrink=allow)
    with pytest.raises(ShrinkRefused, match="no URL at all"):
        check_shrink(LiveState(None, None), 0, 0.10, allow_shrink=allow)


def test_a_first_generation_or_an_empty_live_one_has_nothing_to_shrink_from() -> None:
    check_shrink(LiveState(None, None), 1, 0.10, allow_shrink=False)
    check_shrink(live(0), 1, 0.10, allow_shrink=False)


def test_the_threshold_is_the_share_refused() -> None:
    check_shrink(live(1000), 500, 0.50, allow_shrink=False)
    with pytest.raises(ShrinkRefused, match="more than the 50% allowed"):
        check_shrink(live(1000), 499, 0.50, allow_shrink=False)
    with pytest.raises(ShrinkRefused):
        check_shrink(live(1000), 999, 0.0, allow_shrink=False)


def test_same_content_compares_the_stored_bytes_too() -> None:
    """A shard written again under its key with other gzip bytes is a change: the manifest
    must record what is served (else `status --deep` finds a wrong sha256)."""
    from pipeline.publish import same_content

    entry = {"key": "sitemaps/a-00000-x.xml.gz", "lastmod": "2026-12-01T03:00:00Z",
             "sha256": "s1", "gzip_bytes": 100, "url": "u", "section": "a", "shard": 0,
             "urls": 1, "bytes": 200}
    state = LiveState({"generation": "g", "sitemaps": [entry], "indexes": [{}]},  # type: ignore[typeddict-item]
                      '"etag"')
    assert same_content(state, [dict(entry)], 1)  # type: ignore[list-item]
    assert not same_content(state, [{**entry, "sha256": "s2", "gzip_bytes": 101}], 1)  # type: ignore[list-item]
    assert not same_content(state, [{**entry, "lastmod": "2026-12-02T03:00:00Z"}], 1)  # type: ignore[list-item]
    assert not same_content(state, [dict(entry)], 2)  # type: ignore[list-item]
    assert not same_content(LiveState(None, None), [dict(entry)], 1)  # type: ignore[list-item]
