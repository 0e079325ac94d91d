"""drf-spectacular postprocessing: say in the schema what the API really answers.

Every operation with a path parameter (a league, match, player or referee id) answers 404 with
``{"detail": "..."}`` when no such object exists, and each path parameter has the pattern its URL
converter accepts (``<slug:league_id>``, ``<str:...>``); the schema documents both so that
clients (and schemathesis) can rely on them.
"""

from __future__ import annotations

from typing import Any

# The URL converters' patterns (league/api/urls.py): slug for leagues, one path segment for the rest.
PATH_PATTERNS = {"league_id": r"^[-a-zA-Z0-9_]+$"}
SEGMENT = r"^[^/]+$"
NOT_FOUND = {
    "description": "No such league, match, player or referee.",
    "content": {
        "application/json": {
            "schema": {"type": "object", "properties": {"detail": {"type": "string"}}, "required": ["detail"]}
        }
    },
}


def document_not_found(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            if not isinstance(operation, dict):
                continue
            path_params = [p for p in operation.get("parameters", []) if p.get("in") == "path"]
            for param in path_params:
                param.setdefault("schema", {"type": "string"})
                param["schema"]["pattern"] = PATH_PATTERNS.get(param.get("name"), SEGMENT)
            if path_params:
                operation.setdefault("responses", {}).setdefault("404", NOT_FOUND)
    return result
