"""What a referee keeps on disk (``--state-dir``): its identity and the reports of its matches.

A match's report is written to ``pending/`` as soon as its outcome is known, before it is sent
to the LM and before any player is told it (write ahead), and moved to ``played/`` when the LM
acknowledges it (the players are told after that). So a referee that
is stopped or crashes re-sends every unacknowledged report after a restart, and never plays a
match it has played again: a start_match of a match in either directory is answered with its
saved report (``Referee._start``). ``played/`` keeps the latest ``PLAYED_KEPT`` reports.
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

PLAYED_KEPT = 5000  # acknowledged reports kept on disk (a 100-player league is 4,950 matches)


class StateStore:
    """Keeps nothing when ``directory`` is None (an in-memory referee)."""

    def __init__(self, directory: str | Path | None) -> None:
        self.directory = Path(directory) if directory else None
        if self.directory:
            (self.directory / "pending").mkdir(parents=True, exist_ok=True)
            (self.directory / "played").mkdir(parents=True, exist_ok=True)
            self._prune_played()

    def _report_path(self, key: str, folder: str = "pending") -> Path:
        assert self.directory is not None
        readable = re.sub(r"[^A-Za-z0-9_.-]", "_", key)[:48]
        digest = hashlib.sha256(key.encode()).hexdigest()[:12]
        return self.directory / folder / f"{readable}-{digest}.json"

    def save_report(self, key: str, payload: dict[str, Any]) -> None:
        if self.directory:
            _write_json(self._report_path(key), {"key": key, **payload})

    def remove_report(self, key: str) -> None:
        """The LM acknowledged the report: it moves to ``played/`` (the match is not played again)."""
        if self.directory:
            try:
                os.replace(self._report_path(key), self._report_path(key, "played"))
            except FileNotFoundError:
                pass  # never saved (no league), or acknowledged twice

    def played_report(self, key: str) -> dict[str, Any] | None:
        """The saved report of a match this referee has played (acknowledged or not), or None."""
        if not self.directory:
            return None
        for folder in ("pending", "played"):
            try:
                found = json.loads(self._report_path(key, folder).read_text())
            except (OSError, ValueError):
                continue
            if isinstance(found, dict) and found.get("key") == key:
                return found
        return None

    def _prune_played(self) -> None:
        """Keep the latest ``PLAYED_KEPT`` acknowledged reports (at start-up: one listing)."""
        assert self.directory is not None
        paths = list((self.directory / "played").glob("*.json"))
        if len(paths) <= PLAYED_KEPT:
            return
        paths.sort(key=lambda path: path.stat().st_mtime)
        for path in paths[: len(paths) - PLAYED_KEPT]:
            path.unlink(missing_ok=True)

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
