"""Generation ids begin with their run's UTC time in one format (layout.generation_time):
publish makes them, gc compares them with a time to keep the generations of the last days."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from pipeline import gc, layout
from pipeline.publish import new_generation_id

T = datetime(2026, 12, 4, 3, 0, 0, tzinfo=UTC)


def test_an_id_compares_with_the_time_it_was_made_at() -> None:
    made = new_generation_id(T)
    assert made.startswith("20261204T030000Z-")
    assert layout.generation_time(T) <= made < layout.generation_time(T + timedelta(seconds=1))
    assert made > layout.generation_time(T - timedelta(seconds=1))
    # the same instant in another zone makes the same time
    other = T.astimezone(timezone(timedelta(hours=-5)))
    assert new_generation_id(other)[:16] == made[:16] == layout.generation_time(other)


def test_gc_keeps_the_generations_of_the_last_days_and_the_last_few() -> None:
    now = T
    ages = [timedelta(hours=h) for h in (0, 1, 30, 47, 49, 24 * 10)]
    history = [new_generation_id(now - age) for age in ages]  # newest first
    kept = gc.kept_generations(history, keep=2, keep_days=2, now=now)
    # the last two, and those of the last 48 hours; not those made before
    assert kept == history[:4]
    assert gc.kept_generations(history, keep=5, keep_days=0.5, now=now) == history[:5]
    # an id made one second inside the window is kept, one second outside is not
    edge = [new_generation_id(now), new_generation_id(now - timedelta(days=2) + timedelta(seconds=1)),
            new_generation_id(now - timedelta(days=2) - timedelta(seconds=1))]
    assert gc.kept_generations(edge, keep=1, keep_days=2, now=now) == edge[:2]
