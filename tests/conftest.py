import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# The fixtures for the real S3 server (SeaweedFS) live in tests/s3_fixtures.py.
pytest_plugins = ["tests.s3_fixtures"]

os.environ.setdefault("SITEMAPS_DUCKDB_MEMORY", "1GB")
