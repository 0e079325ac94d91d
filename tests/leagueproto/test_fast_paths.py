"""The cheap forms of hot-path checks agree with the plain ones they replace."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime, timedelta

import pytest

from leagueproto.envelope import (
    deadline_in,
    format_timestamp,
    new_conversation_id,
    new_conversation_ids,
    parse_timestamp,
    utc_now,
)
from leagueproto.errors import LeagueError
from leagueproto.jsonutil import body_depth_exceeds, depth_exceeds, dumps, loads

# Strings holding brackets, quotes and escapes must not count as nesting.
TRICKY_STRINGS = ["", "a", "[", "]", "{", "}", '"', "\\", "[]{}", 'x"[y', "\\[", "é[ü", "\u2028"]


# Without the quote and the backslash: JSON without escapes, where strings are told apart from
# structure by counting adjacent quotes (``body_depth_exceeds``'s cheaper branch).
UNESCAPED_STRINGS = [s for s in TRICKY_STRINGS if '"' not in s and "\\" not in s]


def _random_json(rng: random.Random, depth: int = 0, strings: list[str] = TRICKY_STRINGS) -> object:
    roll = rng.random()
    if depth > 40 or roll < 0.3:
        return rng.choice([*strings, 1, 2.5, None, True])
    if roll < 0.65:
        return [_random_json(rng, depth + 1, strings) for _ in range(rng.randrange(0, 4))]
    return {rng.choice(strings) + str(i): _random_json(rng, depth + 1, strings) for i in range(rng.randrange(0, 4))}


def _chain(rng: random.Random, levels: int) -> object:
    node: object = "leaf"
    for _ in range(levels):
        node = [node, "]]"] if rng.random() < 0.5 else {"k[": node, "s": '"}}"'}
    return node


def test_the_byte_scan_agrees_with_the_object_walk():
    rng = random.Random(7)
    for i in range(3000):
        obj = _random_json(rng) if i % 2 else _chain(rng, rng.randrange(0, 40))
        body = dumps(obj)
        if i % 3 == 0:
            body = body.replace(b",", b" ,\n ")  # whitespace outside strings is allowed too
        for limit in (1, 2, 5, 32):
            assert body_depth_exceeds(body, limit) == depth_exceeds(loads(body), limit), (body, limit)


def test_the_byte_scan_agrees_without_escapes():
    rng = random.Random(11)
    bracketed = 0
    for _ in range(3000):
        body = dumps(_random_json(rng, strings=UNESCAPED_STRINGS))
        assert b"\\" not in body
        bracketed += any(s in body for s in (b'"[', b'"{', b']"', b'}"'))
        for limit in (1, 2, 3, 5, 32):
            assert body_depth_exceeds(body, limit) == depth_exceeds(loads(body), limit), (body, limit)
    assert bracketed > 300  # strings holding brackets were among them


@pytest.mark.parametrize(
    "body,limit,exceeds",
    [
        # A string holding a bracket right after other strings: its quotes are not adjacent.
        (b'{"a":"b","c":"[[[","d":[[]]}', 2, True),
        (b'{"a":"b","c":"[[[","d":[[]]}', 3, False),
        (b'[["x]","]"],["{{",""]]', 1, True),
        (b'[["x]","]"],["{{",""]]', 2, False),
        (b'[["","",""],[["[","]"]]]', 2, True),
        (b'[["","",""],[["[","]"]]]', 3, False),
    ],
)
def test_strings_with_brackets_are_not_structure(body, limit, exceeds):
    assert body_depth_exceeds(body, limit) is exceeds
    assert depth_exceeds(loads(body), limit) is exceeds


@pytest.mark.parametrize("levels,exceeds", [(32, False), (33, True)])
def test_the_limit_is_exact(levels, exceeds):
    body = b"[" * levels + b"]" * levels
    assert body_depth_exceeds(body, 32) is exceeds
    wide = dumps({"standings": [{"rank": i, "name": "[[[[{{{{"} for i in range(200)]})
    assert body_depth_exceeds(wide, 3) is False
    assert body_depth_exceeds(wide, 2) is True


def test_timestamps_are_whole_seconds_in_utc():
    before = format_timestamp(datetime.now(UTC))
    now = utc_now()
    after = format_timestamp(datetime.now(UTC))
    assert before <= now <= after and now.endswith("Z") and len(now) == 20
    expected = format_timestamp(datetime.now(UTC) + timedelta(seconds=90))
    assert deadline_in(90) in (expected, format_timestamp(datetime.now(UTC) + timedelta(seconds=90)))
    assert parse_timestamp(now) == datetime.strptime(now, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def test_a_cached_timestamp_is_still_checked_by_zone():
    assert parse_timestamp("2025-01-15T10:30:00Z") == parse_timestamp("2025-01-15T10:30:00Z")
    with pytest.raises(LeagueError):
        parse_timestamp("2025-01-15T10:30:00+02:00")
    with pytest.raises(LeagueError):
        parse_timestamp("2025-01-15T10:30:00")


def test_conversation_ids_are_16_hex_digits_after_the_prefix_and_do_not_repeat():
    ids = [new_conversation_id() for _ in range(10_000)]
    assert all(re.fullmatch(r"conv-[0-9a-f]{16}", i) for i in ids)
    assert len(set(ids)) == len(ids)
    assert re.fullmatch(r"conv-r1m1-[0-9a-f]{16}", new_conversation_id("conv-r1m1"))


def test_conversation_ids_made_together_look_the_same_and_do_not_repeat():
    ids = [i for _ in range(100) for i in new_conversation_ids(100)]
    assert all(re.fullmatch(r"conv-[0-9a-f]{16}", i) for i in ids)
    assert len(set(ids)) == len(ids) == 10_000
    assert new_conversation_ids(0) == []
    (one,) = new_conversation_ids(1, "conv-r2")
    assert re.fullmatch(r"conv-r2-[0-9a-f]{16}", one)
