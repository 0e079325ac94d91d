"""The bench's pages share what they make of a frame (league/bench/spectator.py ``Frames``)."""

from __future__ import annotations

import zlib

import orjson

from league.api import live
from league.bench.spectator import Frames


def _frame(message: dict, compressed: bool) -> bytes | str:
    text = orjson.dumps(message)
    return zlib.compress(text) if compressed else text.decode()


def test_pages_share_what_a_frame_holds_and_the_state_its_patch_makes():
    frames = Frames()
    first = {"league": {"status": "IN_PROGRESS"}, "standings": [{"player_id": "P01", "points": 0}]}
    later = {"league": {"status": "COMPLETED"}, "standings": [{"player_id": "P01", "points": 3}]}
    snapshot = _frame({"type": "snapshot", "version": "1.a", "data": first}, compressed=False)
    patch = {"type": "patch", "from": "1.a", "version": "1.b", "data": live.diff(first, later)}
    # Each page receives its own copy of the same bytes, as from its own socket.
    a = frames.message(bytes(_frame(patch, True)))
    b = frames.message(bytes(_frame(patch, True)))
    assert a is b and a == patch and frames.decoded == 1
    state = frames.message(snapshot)["data"]
    assert state == first
    one = frames.apply(state, bytes(_frame(patch, True)))
    # A page at that version whose state came another way (its own snapshot) gets the same.
    two = frames.apply(orjson.loads(orjson.dumps(first)), bytes(_frame(patch, True)))
    assert one is two and one == later and frames.applied == 1
    assert state == first  # the state patched is left as it was


def test_frames_keep_only_the_last_few():
    frames = Frames(keep=2)
    for n in range(3):
        frames.message(_frame({"type": "patch", "n": n}, compressed=True))
    frames.message(_frame({"type": "patch", "n": 0}, compressed=True))
    assert frames.decoded == 4
