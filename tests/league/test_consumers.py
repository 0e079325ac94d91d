"""The league websocket: snapshot on connect, then a patch per change with the events that made
it (docs/architecture.md, step 5 of "A match").

Runs on whichever channel layer settings choose: in-memory here, Redis when REDIS_URL is set.
"""

from __future__ import annotations

import re
import zlib

import httpx
import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator

from league import consumers
from league.api import live
from league.events import announce_leagues, broadcast, layer_messages
from league.models import Match
from leaguesite.asgi import application
from tests.browser.league_data import make_league, play, start

pytestmark = pytest.mark.django_db(transaction=True)


def communicator(path: str) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, path, headers=[(b"origin", b"http://localhost")])


async def test_it_sends_a_snapshot_then_patches_it_as_results_come_in():
    league = await database_sync_to_async(make_league)("spring_cup", 4)
    ws = communicator("/ws/leagues/spring_cup/")
    connected, _ = await ws.connect(timeout=2)
    assert connected
    first = await ws.receive_json_from(timeout=2)
    assert first["type"] == "snapshot"
    assert [r["player_id"] for r in first["data"]["standings"]] == ["P01", "P02", "P03", "P04"]
    assert first["data"]["progress"]["matches_total"] == 6
    assert first["viewers"] == 1

    match = await database_sync_to_async(Match.objects.get)(league=league, match_id="R1M2")
    await database_sync_to_async(play)(match, "odd", "even", 4)  # P04 wins (broadcast after commit)
    # Pushes until the event is heard: the change itself may be pushed before its event
    # arrives (a tick that read the league after the commit), never after it.
    state, at, heard = first["data"], first["version"], []
    while "match_finished" not in heard:
        patch = await ws.receive_json_from(timeout=5)
        assert patch["type"] == "patch"
        heard += [e["event"] for e in patch["events"]]
        if patch["data"] is not None:
            assert patch["from"] == at
            state, at = live.apply(state, patch["data"]), patch["version"]
            changed = patch["data"]["$d"]
    assert heard == ["match_finished"]
    assert state["standings"][0]["player_id"] == "P04"
    assert state["recent_matches"][0]["match_id"] == "R1M2"
    assert state["progress"]["matches_finished"] == 1
    # Only what changed travels: untouched rows are not in the patch.
    assert "tie_break_rule" not in changed
    assert set(changed["standings"]["i"]) <= {"P01", "P02", "P03", "P04"}
    assert state == await database_sync_to_async(live.current_data)("spring_cup")
    await ws.disconnect()


async def test_a_page_that_asks_gets_its_patches_compressed_once_for_all():
    """``?deflate=1``: the snapshot as text, then each patch as a binary frame that inflates (zlib)
    to the very text a viewer that did not ask gets."""
    league = await database_sync_to_async(make_league)("spring_cup", 4)
    plain, packed = communicator("/ws/leagues/spring_cup/"), communicator("/ws/leagues/spring_cup/?deflate=1")
    for ws in (plain, packed):
        assert (await ws.connect(timeout=2))[0]
        assert (await ws.receive_json_from(timeout=2))["type"] == "snapshot"
    match = await database_sync_to_async(Match.objects.get)(league=league, match_id="R1M2")
    await database_sync_to_async(play)(match, "odd", "even", 4)
    texts, frames = [], []
    while not any('"match_finished"' in t for t in texts):
        texts.append(await plain.receive_from(timeout=5))
    while not any(b'"match_finished"' in zlib.decompress(f["bytes"]) for f in frames):
        frames.append(await packed.receive_output(timeout=5))
    assert all(frame.get("text") is None for frame in frames)
    # The push of the result: the same text for both.
    assert zlib.decompress(frames[-1]["bytes"]).decode() == texts[-1]
    for ws in (plain, packed):
        await ws.disconnect()


async def page_version(league_id: str) -> str:
    """The version a league page shows (its ``data-at``, which league.js sends as ``?at=``), the
    page loaded through the LM's ASGI application as a browser loads it."""
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        page = await client.get(f"/leagues/{league_id}/")
    return re.search(r'id="league-page"[^>]*\bdata-at="([^"]+)"', page.text)[1]


async def test_a_page_is_sent_what_changed_since_the_version_it_shows_not_the_snapshot():
    """``?at=``: a page at the audience's version is sent an empty patch (it holds the snapshot
    already), a page one push behind that push's patch, any other the snapshot."""
    league = await database_sync_to_async(make_league)("spring_cup", 4)
    shown = await page_version("spring_cup")
    current = communicator(f"/ws/leagues/spring_cup/?deflate=1&at={shown}")
    assert (await current.connect(timeout=2))[0]
    opening = await current.receive_json_from(timeout=2)  # (text, not compressed: it is small)
    assert opening == {"type": "patch", "from": shown, "version": shown, "viewers": 1, "events": [], "data": None}
    snapshot = await database_sync_to_async(live.current_data)("spring_cup")

    match = await database_sync_to_async(Match.objects.get)(league=league, match_id="R1M2")
    await database_sync_to_async(play)(match, "odd", "even", 4)
    plain = communicator("/ws/leagues/spring_cup/")  # (a viewer that takes its pushes as text)
    assert (await plain.connect(timeout=2))[0]
    at = (await plain.receive_json_from(timeout=2))["version"]
    while at == shown:  # until the audience has pushed the result
        at = (await plain.receive_json_from(timeout=5))["version"]
    state = await database_sync_to_async(live.current_data)("spring_cup")

    behind = communicator(f"/ws/leagues/spring_cup/?at={shown}")
    assert (await behind.connect(timeout=2))[0]
    opening = await behind.receive_json_from(timeout=2)
    assert (opening["type"], opening["from"], opening["version"]) == ("patch", shown, at)
    assert live.apply(snapshot, opening["data"]) == state
    for other in ("1.0123456789abcdef", "%22%7D%7B"):  # a version not the last two; not a version
        ws = communicator(f"/ws/leagues/spring_cup/?at={other}")
        assert (await ws.connect(timeout=2))[0]
        opening = await ws.receive_json_from(timeout=2)
        assert (opening["type"], opening["version"], opening["data"]) == ("snapshot", at, state)
        await ws.disconnect()
    for ws in (current, plain, behind):
        await ws.disconnect()


async def test_every_viewer_gets_the_same_push_and_the_count_of_viewers():
    await database_sync_to_async(make_league)("spring_cup", 2)
    viewers = [communicator("/ws/leagues/spring_cup/") for _ in range(3)]
    for ws in viewers:
        await ws.connect(timeout=2)
        await ws.receive_json_from(timeout=2)
    assert consumers.viewer_count("spring_cup") == 3
    # The pages share the audience's one channel in the layer; none has its own.
    assert [v.channel_layer for v in consumers.viewers_of("spring_cup")] == [None] * 3
    last = {}
    for ws in viewers:
        message = await ws.receive_json_from(timeout=3)
        while message["viewers"] != 3:
            message = await ws.receive_json_from(timeout=3)
        last[ws] = message
    await viewers[0].disconnect()
    message = await viewers[1].receive_json_from(timeout=3)
    assert message["viewers"] == 2
    for ws in viewers[1:]:
        await ws.disconnect()
    assert consumers.viewer_count("spring_cup") == 0


async def test_a_brief_viewer_is_told_that_the_league_changed():
    league = await database_sync_to_async(make_league)("spring_cup", 2)
    ws = communicator("/ws/leagues/spring_cup/?brief=1")
    connected, _ = await ws.connect(timeout=2)
    assert connected
    match = await database_sync_to_async(Match.objects.get)(league=league, match_id="R1M1")
    await database_sync_to_async(start)(match)
    moved, heard = False, []
    while not (moved and heard):  # the change may be pushed before its event is heard
        message = await ws.receive_json_from(timeout=3)
        assert (message["type"], message["data"]) == ("changed", None)
        moved = moved or message["moved"]
        heard += [e["event"] for e in message["events"]]
    assert heard == ["match_started"]
    await ws.disconnect()


def _round_one(league) -> list[Match]:
    return list(Match.objects.filter(league=league, round__number=1).select_related("player_a", "player_b"))


async def test_a_page_about_one_player_is_told_of_its_changes_at_once_and_of_the_others_now_and_then(monkeypatch):
    """``?brief=1&about=P03`` (P03's page): a result of others is not a reason to re-read the page
    (until BRIEF_EVERY has passed); P03's own is, at once."""
    monkeypatch.setattr(consumers, "BRIEF_EVERY", 60.0)
    league = await database_sync_to_async(make_league)("spring_cup", 4)
    ws = communicator("/ws/leagues/spring_cup/?brief=1&about=P03")
    assert (await ws.connect(timeout=2))[0]
    [viewer] = consumers.viewers_of("spring_cup")
    assert (viewer.brief, viewer.about) == (True, "P03")
    matches = await database_sync_to_async(_round_one)(league)
    mine = next(m for m in matches if "P03" in (m.player_a.player_id, m.player_b.player_id))
    other = next(m for m in matches if m is not mine)
    await database_sync_to_async(play)(other, "odd", "even", 4)
    assert await ws.receive_nothing(timeout=1.5)
    await database_sync_to_async(play)(mine, "odd", "even", 4)
    message = await ws.receive_json_from(timeout=3)
    assert (message["type"], message["data"], message["moved"]) == ("changed", None, True)
    assert mine.match_id in [e["data"].get("match_id") for e in message["events"]]
    # The league's other changes: told once BRIEF_EVERY has passed since the page was last told.
    monkeypatch.setattr(consumers, "BRIEF_EVERY", 0.0)
    later = await database_sync_to_async(Match.objects.get)(league=league, round__number=2, player_a__player_id="P04")
    assert "P03" not in (await database_sync_to_async(lambda: (later.player_a.player_id, later.player_b.player_id))())
    await database_sync_to_async(play)(later, "odd", "even", 4)
    message = await ws.receive_json_from(timeout=5)
    assert (message["type"], message["moved"]) == ("changed", True)
    await ws.disconnect()


async def test_the_league_list_hears_of_a_new_league_and_then_of_its_events():
    ws = communicator("/ws/leagues/")
    connected, _ = await ws.connect(timeout=2)
    assert connected
    await database_sync_to_async(make_league)("fresh", 2)
    await database_sync_to_async(announce_leagues)("league_created", "fresh")
    event = await ws.receive_json_from(timeout=2)
    assert event == {"type": "event", "event": "league_created", "data": {"league_id": "fresh"}}
    # The list joined the new league's group on the way: its events reach the home page too.
    await database_sync_to_async(broadcast)("fresh", "match_started", {"match_id": "R1M1", "league_id": "fresh"})
    event = await ws.receive_json_from(timeout=2)
    assert (event["event"], event["data"]["match_id"]) == ("match_started", "R1M1")
    await ws.disconnect()


async def test_the_league_list_hears_an_event_sent_the_moment_its_socket_opens():
    """The page counts itself live once its socket opens: whatever is announced from then on
    reaches it (the socket joins its groups before it is accepted)."""
    await database_sync_to_async(make_league)("early", 2)
    ws = communicator("/ws/leagues/")
    connected, _ = await ws.connect(timeout=2)
    assert connected
    layer = get_channel_layer()
    await layer.group_send(
        "leagues", {"type": "league.events", "events": [{"event": "league_created", "data": {"league_id": "x"}}]}
    )
    await layer.group_send(
        "league_early", {"type": "league.events", "events": [{"event": "round_started", "data": {}}]}
    )
    heard = [(await ws.receive_json_from(timeout=2))["event"] for _ in range(2)]
    assert heard == ["league_created", "round_started"]
    await ws.disconnect()


async def test_the_league_list_hears_each_event_of_a_commit_in_order():
    await database_sync_to_async(make_league)("spring_cup", 2)
    ws = communicator("/ws/leagues/")
    assert (await ws.connect(timeout=2))[0]
    sent = [("league_spring_cup", "match_finished", {"match_id": f"R1M{i}"}) for i in (1, 2)]
    [(group, message)] = layer_messages(sent)  # one layer message for both
    await get_channel_layer().group_send(group, message)
    heard = [await ws.receive_json_from(timeout=2) for _ in sent]
    assert [(e["event"], e["data"]["match_id"]) for e in heard] == [
        ("match_finished", "R1M1"),
        ("match_finished", "R1M2"),
    ]
    await ws.disconnect()


async def test_it_only_sends_a_league_its_own_events():
    await database_sync_to_async(make_league)("one", 2)
    await database_sync_to_async(make_league)("two", 2)
    ws = communicator("/ws/leagues/one/")
    await ws.connect(timeout=2)
    await ws.receive_json_from(timeout=2)
    layer = get_channel_layer()
    await layer.group_send("league_two", {"type": "league.events", "events": [{"event": "round_started", "data": {}}]})
    await layer.group_send(
        "league_one", {"type": "league.events", "events": [{"event": "round_completed", "data": {"round_id": 1}}]}
    )
    heard = []
    while not heard or heard[-1] != "round_completed":
        heard += [e["event"] for e in (await ws.receive_json_from(timeout=3))["events"]]
    assert heard == ["round_completed"]
    await ws.disconnect()


async def test_it_answers_a_snapshot_request():
    await database_sync_to_async(make_league)("spring_cup", 2)
    ws = communicator("/ws/leagues/spring_cup/")
    await ws.connect(timeout=2)
    await ws.receive_json_from(timeout=2)
    await ws.send_json_to({"type": "snapshot"})
    again = await ws.receive_json_from(timeout=2)
    while again["type"] != "snapshot":  # a push of the viewer count may come first
        again = await ws.receive_json_from(timeout=2)
    assert again["type"] == "snapshot"
    assert again["data"]["league"]["league_id"] == "spring_cup"
    await ws.disconnect()


async def test_it_refuses_unknown_leagues_and_foreign_origins():
    ws = communicator("/ws/leagues/nope/")
    connected, code = await ws.connect(timeout=2)
    assert not connected
    assert code == 4404
    await database_sync_to_async(make_league)("spring_cup", 2)
    foreign = WebsocketCommunicator(
        application, "/ws/leagues/spring_cup/", headers=[(b"origin", b"http://evil.example")]
    )
    connected, _ = await foreign.connect(timeout=2)
    assert not connected


def test_the_push_interval_grows_with_the_audience_up_to_a_second():
    # A process sends at most PUSHES_PER_SECOND messages a second over all its viewers, and no
    # page waits a second (the interval stops short of it: the push's own read comes on top).
    assert consumers.push_interval(1) == consumers.push_interval(100) == consumers.THROTTLE == 0.25
    assert consumers.push_interval(200) == 200 / consumers.PUSHES_PER_SECOND
    assert consumers.push_interval(500) == consumers.push_interval(10_000) == consumers.LATEST == 0.75


def test_the_next_push_counts_from_the_start_of_the_last_and_leaves_the_league_its_share():
    assert consumers.next_push_in(1, spent=0.1, cost=0.01) == pytest.approx(0.15)
    assert consumers.next_push_in(500, spent=0.25, cost=0.0) == pytest.approx(0.5)
    assert consumers.next_push_in(1, spent=0.4, cost=0.0) == 0.0  # late already: at once
    # A push that built a snapshot for 0.2 s of CPU: the next waits 0.6 s, so that reads take a
    # quarter of a core at most.
    assert consumers.next_push_in(1, spent=0.3, cost=0.2) == pytest.approx(0.6)


async def test_a_push_to_a_page_that_has_gone_is_not_an_error():
    viewer = consumers.LeagueConsumer()

    async def closed(message):  # what an ASGI server does with a send on a closed socket
        raise OSError("the page has gone")

    viewer.base_send = closed
    viewer.offer(b"patch")
    await viewer.sending
    assert viewer.sending.exception() is None


async def _until_version_moves(ws: WebsocketCommunicator, at: str) -> dict:
    """The next push that moves a page at version ``at`` on."""
    message = await ws.receive_json_from(timeout=5)
    while message["version"] == at:
        message = await ws.receive_json_from(timeout=5)
    return message


async def test_another_process_forwards_the_leads_pushes_and_leads_once_the_lead_is_gone(monkeypatch):
    """Two LM processes with pages of one league (each its own audiences, one channel layer and
    cache between them, as with Redis): the first leads, working out each push and publishing it;
    the second forwards it to its pages and reports their count; when the lead's process dies (its
    lease lapses unrenewed), the second leads and its pages go on from the version they show."""
    monkeypatch.setattr(consumers, "LEASE", 1.0)
    league = await database_sync_to_async(make_league)("spring_cup", 4)
    one, two = {}, {}  # each process's audiences
    monkeypatch.setattr(consumers, "_audiences", one)
    first = communicator("/ws/leagues/spring_cup/")
    assert (await first.connect(timeout=2))[0]
    snapshot = await first.receive_json_from(timeout=2)
    lead = one["spring_cup"]
    monkeypatch.setattr(consumers, "_audiences", two)
    second = communicator("/ws/leagues/spring_cup/")
    assert (await second.connect(timeout=2))[0]
    assert (await second.receive_json_from(timeout=2))["data"] == snapshot["data"]
    follower = two["spring_cup"]
    assert (lead.lead, follower.lead) == (True, False)
    # The lead counts the other process's page: both pages are told there are two.
    for ws in (first, second):
        message = await ws.receive_json_from(timeout=5)
        while message["viewers"] != 2:
            message = await ws.receive_json_from(timeout=5)

    match = await database_sync_to_async(Match.objects.get)(league=league, match_id="R1M2")
    await database_sync_to_async(play)(match, "odd", "even", 4)
    pushed = [await _until_version_moves(ws, snapshot["version"]) for ws in (first, second)]
    assert pushed[0] == pushed[1]  # one push, worked out by the lead
    assert pushed[1]["from"] == snapshot["version"]
    state = live.apply(snapshot["data"], pushed[1]["data"])
    assert state == await database_sync_to_async(live.current_data)("spring_cup")
    assert follower.step is None  # it never read the league for a push
    # A page of the second process rendered a push ago is sent that push's patch, not the snapshot.
    behind = communicator(f"/ws/leagues/spring_cup/?at={snapshot['version']}")
    assert (await behind.connect(timeout=2))[0]
    opening = await behind.receive_json_from(timeout=2)
    assert (opening["type"], opening["from"], opening["version"]) == (
        "patch",
        snapshot["version"],
        pushed[1]["version"],
    )
    assert live.apply(snapshot["data"], opening["data"]) == state
    await behind.disconnect()

    # The lead's process dies: its tasks stop, its lease is not renewed.
    for task in lead.tasks:
        task.cancel()
    match = await database_sync_to_async(Match.objects.get)(league=league, match_id="R1M1")
    await database_sync_to_async(play)(match, "odd", "even", 4)
    message = await _until_version_moves(second, pushed[1]["version"])
    assert follower.lead
    assert message["from"] == pushed[1]["version"]  # a patch from where the page was, not a snapshot
    state = live.apply(state, message["data"])
    assert state == await database_sync_to_async(live.current_data)("spring_cup")
    await second.disconnect()
    monkeypatch.setattr(consumers, "_audiences", one)
    await first.disconnect()
