"""W3C datetimes (https://www.w3.org/TR/NOTE-datetime) to the second, in UTC: the one
format of the times in manifests, indexes, the feed and the run report."""

from __future__ import annotations

from datetime import UTC, datetime

#: 2024-05-01T12:00:00Z
W3C_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def format_w3c(value: datetime) -> str:
    """`value` as a W3C datetime: an aware value is converted to UTC; a naive one is
    taken as UTC already (DuckDB's sessions run in UTC)."""
    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    return value.strftime(W3C_FORMAT)


def parse_w3c(text: str) -> datetime:
    """An aware UTC datetime from a W3C datetime this pipeline wrote (format_w3c)."""
    return datetime.strptime(text, W3C_FORMAT).replace(tzinfo=UTC)
