"""One place for JSON encoding: orjson, because JSON dominates the agents' hot paths."""

from __future__ import annotations

from typing import Any

import orjson


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS)


def dumps_str(obj: Any) -> str:
    return dumps(obj).decode()


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


def depth_exceeds(obj: Any, limit: int) -> bool:
    """True when containers nest deeper than ``limit`` (checked iteratively, no recursion)."""
    stack = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
