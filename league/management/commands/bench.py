"""``python manage.py bench …``: measured performance figures (docs/benchmarks.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from league.bench.machine import machine_info


class Command(BaseCommand):
    help = "Benchmarks: ceiling (HTTP + JSON-RPC reference)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="what", required=True)
        ceiling = sub.add_parser("ceiling", help="minimal JSON-RPC calls on the agents' stack")
        ceiling.add_argument("--calls", type=int, default=70_000)
        ceiling.add_argument("--concurrency", type=int, default=32)
        ceiling.add_argument("--quick", action="store_true", help="a few thousand calls, for the suite")
        ceiling.add_argument("--json", dest="json_path", help="also write the report to this file")

    def handle(self, *args: Any, **options: Any) -> None:
        what = options["what"]
        if what == "ceiling":
            from league.bench.ceiling import run_ceiling

            calls = 2_000 if options["quick"] else options["calls"]
            report: dict[str, Any] = run_ceiling(calls, options["concurrency"])
        report["machine"] = machine_info()
        self._emit(report, options.get("json_path"))

    def _emit(self, report: dict[str, Any], json_path: str | None) -> None:
        text = json.dumps(report, indent=2)
        if json_path:
            Path(json_path).write_text(text + "\n")
        self.stdout.write(text)
