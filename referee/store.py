"""What a referee keeps on disk (``--state-dir``): its identity and unacknowledged reports.

A finished match's report is written here before it is first sent and removed only when the
LM acknowledges it, so a referee that is stopped or crashes re-sends it after a restart.
Files are replaced atomically (write to a temporary file, then rename).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any


class StateStore:
    """Keeps nothing when ``directory`` is None (an in-memory referee)."""

    def __init__(self, directory: str | Path | None) -> None:
        self.directory = Path(directory) if directory else None
        if self.directory:
            (self.directory / "pending").mkdir(parents=True, exist_ok=True)

    def _report_path(self, key: str) -> Path:
        assert self.directory is not None
        readable = re.sub(r"[^A-Za-z0-9_.-]", "_", key)[:48]
        digest = hashlib.sha256(key.encode()).hexdigest()[:12]
        return self.directory / "pending" / f"{readable}-{digest}.json"

    def save_report(self, key: str, payload: dict[str, Any]) -> None:
        if self.directory:
            _write_json(self._report_path(key), {"key": key, **payload})

    def remove_report(self, key: str) -> None:
        if self.directory:
            self._report_path(key).unlink(missing_ok=True)

    def pending_reports(self) -> list[dict[str, Any]]:
        if not self.directory:
            return []
        found = []
        for path in sorted((self.directory / "pending").glob("*.json")):
            try:
                found.append(json.loads(path.read_text()))
            except (OSError, ValueError):
                continue  # a torn file cannot happen with atomic writes; skip anything foreign
        return found

    def save_identity(self, identity: dict[str, Any]) -> None:
        if self.directory:
            _write_json(self.directory / "identity.json", identity)

    def load_identity(self) -> dict[str, Any] | None:
        if not self.directory:
            return None
        try:
            return json.loads((self.directory / "identity.json").read_text())
        except (OSError, ValueError):
            return None


def _write_json(path: Path, data: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh)
        os.chmod(tmp, 0o600)  # the identity holds a bearer token
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
