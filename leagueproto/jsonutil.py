"""One place for JSON encoding: orjson, because JSON dominates the agents' hot paths."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS)


def dumps_str(obj: Any) -> str:
    return dumps(obj).decode()


class OrjsonEncoder(json.JSONEncoder):
    """A ``json.JSONEncoder`` that writes with orjson, for Django's ``JSONField(encoder=...)``:
    a match's log (~100 nodes) costs json's Python encoder ~10 times orjson's. What orjson
    cannot write (an integer beyond 64 bits) is written by json's own encoder."""

    def encode(self, o: Any) -> str:
        try:
            return dumps_str(o)
        except TypeError:  # orjson.JSONEncodeError is one
            return super().encode(o)


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


# A JSON string literal (escapes included); in valid JSON no quote appears outside one.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))
_NOT_STRUCTURE = bytes(sorted(set(range(256)) - set(b'[]{}"\\')))


def body_depth_exceeds(body: bytes, limit: int) -> bool:
    """``depth_exceeds(loads(body), limit)`` computed on the raw bytes, at C speed.

    ``body`` must be valid JSON (call it after parsing succeeded). The walk over the parsed
    object cost more than parsing itself (a 60-row standings table: ~400 µs); here most
    bodies are settled by counting brackets, the rest by a few passes over their skeleton.
    """
    skeleton = body.translate(None, _NOT_STRUCTURE)
    if skeleton.count(b"{") + skeleton.count(b"[") <= limit:
        return False  # even if every bracket were a container, all nested in one chain
    quotes = skeleton.count(b'"')
    if b"\\" not in skeleton and skeleton.count(b'""') * 2 == quotes:
        # Without escapes, a string without brackets leaves two adjacent quotes. Counted left
        # to right, the adjacent pairs are all the quotes exactly when no string held a bracket
        # (the first string that does leaves a run of an odd number of quotes before its
        # bracket), and then what is not a quote is structure. Counting is cheaper than
        # replacing the pairs: ~1,100 of them in a 100-row standings table.
        skeleton = skeleton.translate(None, b'"')
    elif quotes:  # strings with brackets or escapes: drop every string exactly
        skeleton = _STRING.sub(b"", body).translate(None, _NOT_BRACKET)
    # Each pass removes the containers that are empty now, i.e. those of height k at pass k
    # (the placeholder keeps a "[{}]" from losing both levels in one pass).
    for _ in range(limit):
        skeleton = skeleton.replace(b"{}", b"\0").replace(b"[]", b"\0").replace(b"\0", b"")
        if not skeleton:
            return False
    return True
