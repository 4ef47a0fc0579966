"""The per-file limits of a run (`pipeline.settings.Limits`, the one run-options model)."""

from __future__ import annotations

from pipeline.settings import Limits

__all__ = ["Limits"]
