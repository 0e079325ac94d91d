"""Where a bench plays: on the embedded default, a database of its own.

A 100-player league leaves ~70 MB in the database (its Event log and match logs) and a
``bench_…`` league in the site's list. On the embedded default (no ``DATABASE_URL``: the
teacher's own ``db.sqlite3``) every bench therefore runs in a new SQLite file, removed
afterwards, which also gives every run the same empty start. With ``DATABASE_URL`` set the bench
uses that database, as the suite does (it reads the results back) and as PostgreSQL runs do.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connections

SQLITE = "django.db.backends.sqlite3"


@dataclass
class ScratchDatabase:
    path: Path

    def remove(self) -> None:
        connections["default"].close()
        shutil.rmtree(self.path.parent, ignore_errors=True)

    def describe(self, kept: bool) -> dict[str, Any]:
        return {"engine": "sqlite", "scratch": True, "path": str(self.path) if kept else None}


def scratch_database() -> ScratchDatabase | None:
    """Point this process, and the agents it starts (they inherit ``DATABASE_URL``), at a new
    SQLite file; ``None`` when ``DATABASE_URL`` names the database to use. Call it before the
    first query (the connection is closed and renamed, as Django's test runner does)."""
    if os.environ.get("DATABASE_URL") or settings.DATABASES["default"]["ENGINE"] != SQLITE:
        return None
    path = Path(tempfile.mkdtemp(prefix="league-bench-db-")) / "bench.sqlite3"
    connection = connections["default"]
    connection.close()
    for config in (settings.DATABASES["default"], connection.settings_dict):
        config["NAME"] = str(path)
    os.environ["DATABASE_URL"] = f"sqlite:///{path}"
    return ScratchDatabase(path)


def configured_database() -> dict[str, Any]:
    """The report's ``database`` when the bench used the configured one."""
    engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    return {"engine": "sqlite" if engine == "sqlite3" else engine, "scratch": False, "path": None}
