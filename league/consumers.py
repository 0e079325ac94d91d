"""The dashboard's websockets: a league's viewers, and the league list.

A league's viewers in this process share one :class:`Audience`, so an event costs one message
per process, not one per viewer (and a commit's events to a league go as one message,
``events.layer_messages``). One audience of the league, whichever process it is in, leads: it
hears the league's events (or every ``POLL`` seconds looks, for changes made where it cannot
hear them), reads the league's snapshot at its current version (built once per version and
shared, ``league.api.live``), works out the patch from what it sent last, encodes it once, sends
it to its viewers and publishes it to the audiences of the other processes, which forward it to
theirs: at most one push per ``push_interval`` (0.25 s, growing with the audience to at most
``LATEST``, 0.75 s), never later than that (a busy league is pushed to on every tick, not
postponed). ``LeagueConsumer`` is thin: it joins the audience, sends the audience's opening
(``Audience.opening``) on connect, and leaves. ``LeagueListConsumer`` (the home page) joins the
group of every league and ``LEAGUES_GROUP``, where a league's creation or deletion is announced
(``events.announce_leagues``). The ORM runs in ``database_sync_to_async``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zlib
from typing import Any
from urllib.parse import parse_qs

import orjson
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import get_channel_layer
from django.core.cache import cache

from league import events
from league.api import live
from league.events import LEAGUES_GROUP, group_name
from league.models import League, league_id_problem

log = logging.getLogger(__name__)

# At most one push per THROTTLE seconds, and a page never more than LATEST late, however busy
# the league. Between the two the interval grows with the audience: this process sends at most
# PUSHES_PER_SECOND messages a second over all its viewers (a push costs a send per viewer, and
# the viewers' sends share the process with the recording of results), so 100 viewers are pushed
# to every 0.25 s and 300 or more every 0.75 s. LATEST stops short of a second because the
# push's own read and sends come on top of it, and vary: with 1.0, the longest wait of 500 pages
# of `bench spectators` was 1.08-1.26 s; with 0.75, 0.84-0.96 s (median), for a seventh more
# of the LM's CPU (docs/benchmarks.md). And the reads for the pushes take at most
# 1/READ_SHARE of a core: after a push that cost C seconds of CPU (a snapshot built for a new
# version), the next waits (READ_SHARE - 1) × C at least, so that the recording of results
# always has the rest.
THROTTLE = 0.25
LATEST = 0.75
PUSHES_PER_SECOND = 400
READ_SHARE = 4
# A look at the league's version this often when no event came: changes made by a process whose
# events cannot reach this one (the conductor on the in-memory channel layer).
POLL = 2.0
# Several LM processes: the lead's lease on a league's audiences lasts LEASE seconds unless renewed
# (at every wake, at least every POLL), so a follower takes over within LEASE + POLL of its lead's
# process dying; a lead forgets a follower's pages when it has not heard from it in REPORT_STALE.
LEASE = 5.0
REPORT_STALE = 3 * POLL
# The events named in one push, at most (the page shows the latest).
EVENTS_PER_PUSH = 20
# A page about one agent or match (``?brief=1&about=<id>``: a player's, a referee's, a match's
# page, which re-read themselves) is told at once of a change that names its subject, and of the
# league's other changes at most every BRIEF_EVERY seconds (its rank, the round): a class with each
# student on their own player's page re-reads each page a few times a round, not on every push.
BRIEF_EVERY = 5.0
# The longest ``about`` taken (ids are short; anything longer names nothing).
ABOUT_MAX = 100
# zlib's level for the pushes sent compressed (``?deflate=1``): 6, its default, takes a 60 KB
# patch to ~8 KB in about a millisecond, once per push.
PUSH_COMPRESSION = 6


def _named(data: dict[str, Any]) -> dict[str, Any]:
    """An event's scalar fields (which match, round, player; a status): what it changed comes in
    the push's patch, so its nested parts (a result's details, a round's pairs) are not sent to
    every viewer again."""
    return {name: value for name, value in data.items() if not isinstance(value, dict | list)}


def _snapshot_text(version: str, viewers: int, data: str) -> str:
    """The snapshot message around ``data``, the snapshot's JSON as encoded once per version."""
    return f'{{"type":"snapshot","version":"{version}","viewers":{viewers},"data":{data}}}'


def _patch_text(start: str, version: str, viewers: int, data: str) -> str:
    """A patch message from ``start`` to ``version`` around ``data``, the patch's JSON as encoded
    once (both versions are the audience's own, never a client's text)."""
    return f'{{"type":"patch","from":"{start}","version":"{version}","viewers":{viewers},"events":[],"data":{data}}}'


def push_interval(viewers: int) -> float:
    """Seconds between two pushes to ``viewers`` pages of one league in this process."""
    return min(LATEST, max(THROTTLE, viewers / PUSHES_PER_SECOND))


def next_push_in(viewers: int, spent: float, cost: float) -> float:
    """Seconds to wait after a push that took ``spent`` seconds and ``cost`` seconds of CPU: the
    interval counts from the push's start (its read can take a while on a busy machine), the
    reads' share (``READ_SHARE``) from its end."""
    return max(push_interval(viewers) - spent, (READ_SHARE - 1) * cost, 0.0)


class Audience:
    """The viewers of one league in this process, and the one task that pushes to them.

    With several LM processes (a Redis channel layer and cache) one audience of a league *leads*:
    it holds the league's lease in Django's cache (``LEASE``, renewed on every wake), hears the
    league's events, works out each push and publishes its encodings to the league's pushes group;
    the audiences of the other processes *follow*: they forward what they are published to their
    own pages, and tell the lead how many pages they have (``live.viewers``), so a push counts the
    whole class. A change is read, diffed and encoded once for all the processes, and only the
    lead hears every event. A follower whose lead stops renewing (its process died) takes the
    lease and goes on from the version its pages show."""

    def __init__(self, league_id: str) -> None:
        self.league_id = league_id
        self.group = group_name(league_id)
        self.viewers: set[LeagueConsumer] = set()
        self.lead = False
        self.step: live.Step | None = None  # the lead's last step (its data is the next diff's start)
        self.version: str | None = None  # the version the viewers were last sent
        self.snapshot_json: str | None = None  # the snapshot at that version (read when asked)
        # The version before the last one the viewers were sent, and the patch from it (encoded
        # when a new viewer first asks for it): what a page rendered a push ago is sent instead of
        # the whole snapshot. A follower takes the patch from the text of the push that moved it.
        self.moved_from: str | None = None
        self.moved_patch: Any = None
        self.moved_plain: str | None = None
        self.moved_json: str | None = None
        self.published: dict[str, str | bytes] = {}  # a follower's last push, in each form
        self.published_count = 0  # the class's page count that push told
        self.news: list[dict[str, Any]] = []
        self.named: set[str] = set()  # the ids the events since the last push named (all of them)
        self.changed = asyncio.Event()
        self.counted = 0  # the viewer count the pages were last told
        self.others: dict[str, tuple[int, float]] = {}  # the lead's followers: channel -> (pages, when)
        self.lead_channel: str | None = None  # a follower's lead (the lease's holder)
        self.reported: tuple[str, int] | None = None  # a follower's last report: (lead, pages)
        self.reported_at = 0.0
        self.held_at = -LEASE  # when the lease was last looked at
        self.tasks: list[asyncio.Task] = []
        self.ready = asyncio.Lock()
        self.loop = asyncio.get_running_loop()
        self.channel = ""

    # -- who is watching ------------------------------------------------------------------
    @classmethod
    async def open(cls, league_id: str) -> Audience | None:
        """The league's audience in this process, at a version it can send a new viewer; None
        when there is no such league."""
        audience = _audiences.get(league_id)
        if audience is None or audience.loop is not asyncio.get_running_loop():
            if audience is not None:
                # Another event loop's audience is a dead one (a test's server that was stopped):
                # its lease would hold this one back until it lapsed.
                await audience.release()
            audience = _audiences[league_id] = cls(league_id)
        async with audience.ready:  # (viewers arriving together start it once)
            if audience.version is None and not await audience.refresh():
                if not audience.viewers and _audiences.get(league_id) is audience:
                    del _audiences[league_id]
                return None
            if not audience.tasks:
                await audience.start()
        return audience

    async def add(self, viewer: LeagueConsumer, shown: str | None = None) -> str:
        """Count ``viewer`` in; what to send it first (every later push patches what that makes)."""
        self.viewers.add(viewer)
        self.changed.set()  # the count shown on the pages
        return await self.opening(shown)

    def count(self) -> int:
        """The pages of the league the lead knows of (its own and its followers' last reports);
        a follower's own until a push tells it the class's."""
        if not self.lead:
            return max(len(self.viewers), self.published_count)
        now = self.loop.time()
        return len(self.viewers) + sum(n for n, at in self.others.values() if now - at < REPORT_STALE)

    async def opening(self, shown: str | None) -> str:
        """What a new viewer whose page shows version ``shown`` (the version the page was rendered
        at, or its socket's last) is sent first: an empty patch when that is the current version,
        the last patch when it is the one before, else the whole snapshot. A class opening the page
        together is sent a few bytes each, not the snapshot its pages already hold (~150 KB for
        100 players)."""
        current = self.version
        if shown == current:
            return _patch_text(current, current, self.count(), "null")
        if self.moved_from is not None and shown == self.moved_from:
            if self.moved_json is None:
                self.moved_json = self._moved_json()
            return _patch_text(shown, current, self.count(), self.moved_json)
        return await self.snapshot_text()

    def _moved_json(self) -> str:
        if self.lead or self.moved_plain is None:
            return orjson.dumps(self.moved_patch).decode()
        return orjson.dumps(orjson.loads(self.moved_plain)["data"]).decode()

    async def snapshot_text(self) -> str:
        if self.snapshot_json is None:
            # A follower's version was published by the lead, which keeps its snapshot in the
            # cache; past the cache's time, the league's current one.
            snapshot = await database_sync_to_async(live.at_version, thread_sensitive=False)(
                self.league_id, self.version
            )
            if snapshot is None:
                return _snapshot_text(self.version or "", self.count(), "null")
            if snapshot.version != self.version:  # (the page takes it; the next push resyncs it)
                return _snapshot_text(snapshot.version, self.count(), snapshot.blob.decode())
            self.snapshot_json = snapshot.blob.decode()
        return _snapshot_text(self.version, self.count(), self.snapshot_json)

    async def leave(self, viewer: LeagueConsumer) -> None:
        self.viewers.discard(viewer)
        if self.viewers or _audiences.get(self.league_id) is not self:
            self.changed.set()
            return
        del _audiences[self.league_id]
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.release()

    async def release(self) -> None:
        """Leave the league's groups and give up the lease (a follower takes it at its next
        wake), or tell the lead this process's pages are gone."""
        if not self.channel:
            return
        layer = get_channel_layer()
        with contextlib.suppress(Exception):  # (a layer or cache outage ends the audience anyway)
            if self.lead:
                await self._stop_leading(layer)
                await _sync(_release_lease)(self.league_id, self.channel)
            else:
                await layer.group_discard(_pushes_group(self.league_id), self.channel)
                if self.reported is not None:
                    await layer.send(self.reported[0], {"type": "live.viewers", "channel": self.channel, "viewers": 0})
        self.channel = ""

    async def start(self) -> None:
        layer = get_channel_layer()
        self.channel = await layer.new_channel()
        lead = await _sync(_claim_lease)(self.league_id, self.channel)
        if lead == self.channel:
            await self._lead(layer)
        else:
            self.lead_channel = lead
            await self._follow(layer)
        self.held_at = self.loop.time()
        self.tasks = [asyncio.create_task(self.listen(layer)), asyncio.create_task(self.run(layer))]

    async def _lead(self, layer: Any) -> None:
        self.lead = True
        await layer.group_add(self.group, self.channel)
        events.joined(self.group)

    async def _stop_leading(self, layer: Any) -> None:
        await layer.group_discard(self.group, self.channel)
        events.left(self.group)

    async def _follow(self, layer: Any) -> None:
        self.lead, self.step, self.others = False, None, {}
        await layer.group_add(_pushes_group(self.league_id), self.channel)

    async def hold(self, layer: Any) -> None:
        """Renew this lead's lease, or step down when another process holds it; a follower takes
        the lease when its lead's has lapsed, going on from the version its pages show."""
        now = self.loop.time()
        if now - self.held_at < POLL / 2:
            return
        self.held_at = now
        if self.lead:
            if not await _sync(_renew_lease)(self.league_id, self.channel):
                await self._stop_leading(layer)
                await self._follow(layer)
            return
        lead = await _sync(_claim_lease)(self.league_id, self.channel)
        if lead != self.channel:
            self.lead_channel = lead
            return
        await layer.group_discard(_pushes_group(self.league_id), self.channel)
        await self._lead(layer)
        self.reported = None
        # The next diff starts from the snapshot the pages show (the cache keeps it).
        kept = await _sync(live.kept)(self.league_id, self.version)
        self.step = live.Step(kept, kept.data(), None) if kept is not None else None
        self.changed.set()

    async def report(self, layer: Any) -> None:
        """Tell the lead how many pages this process has: when that changed, or the lead did, and
        every ``POLL`` (a lead forgets a follower it has not heard from in ``REPORT_STALE``)."""
        lead, now = self.lead_channel, self.loop.time()
        if lead is None or (self.reported == (lead, len(self.viewers)) and now - self.reported_at < POLL):
            return
        self.reported, self.reported_at = (lead, len(self.viewers)), now
        await layer.send(lead, {"type": "live.viewers", "channel": self.channel, "viewers": len(self.viewers)})

    # -- what changed ---------------------------------------------------------------------
    async def listen(self, layer: Any) -> None:
        """The lead hears every event of the league's group (one message per commit) and its
        followers' counts; a follower hears the lead's pushes."""
        while True:
            message = await layer.receive(self.channel)
            kind = message.get("type")
            if kind == "live.push":
                if not self.lead:
                    self.forward(message)
                continue
            if kind == "live.viewers":
                channel, viewers = message.get("channel"), message.get("viewers")
                if isinstance(channel, str) and isinstance(viewers, int):
                    if viewers > 0:
                        self.others[channel] = (viewers, self.loop.time())
                    else:  # (its pages have gone)
                        self.others.pop(channel, None)
                    self.changed.set()
                continue
            for item in events.events_of(message):
                named = _named(item.get("data") or {})
                self.news.append({"event": item.get("event"), "data": named})
                self.named.update(value for value in named.values() if isinstance(value, str))
            del self.news[:-EVENTS_PER_PUSH]
            self.changed.set()

    async def run(self, layer: Any) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), POLL)
            self.changed.clear()
            began = self.loop.time()
            cost = 0.0
            try:
                await self.hold(layer)
                if self.lead:
                    await self.push(layer)
                    cost = self.step.cpu_seconds if self.step else 0.0
                else:
                    await self.report(layer)
                    self.tell_due()
            except Exception:  # a failed read is tried again on the next tick
                log.exception("push to the viewers of %s failed", self.league_id)
            await asyncio.sleep(next_push_in(len(self.viewers), self.loop.time() - began, cost))

    async def refresh(self) -> bool:
        """Move to the league's current version; False when the league is gone."""
        previous = self.step
        step = await database_sync_to_async(live.step, thread_sensitive=False)(
            self.league_id,
            previous.data if previous else None,
            previous.snapshot.version if previous else None,
        )
        if step is None:
            return False
        self.step = step
        if step.snapshot.version != self.version:
            moved = previous is not None and step.patch is not None
            self.moved_from = self.version if moved else None
            self.moved_patch, self.moved_json = (step.patch if moved else None), None
            self.version, self.snapshot_json = step.snapshot.version, step.snapshot.blob.decode()
        return True

    async def push(self, layer: Any) -> None:
        """Send every viewer what changed since the last push: one text, encoded once (and
        published once to the followers). The events sent are those heard before the league was
        read, so a page never hears of an event before it can see what the event changed."""
        shown, news, named = self.version, self.news, self.named
        self.news, self.named = [], set()
        async with self.ready:
            if not await self.refresh():
                for viewer in list(self.viewers):
                    await viewer.close(code=4404)
                return
        step = self.step
        moved = step.snapshot.version != shown
        now = self.loop.time()
        total = self.count()
        if not moved and not news and self.counted == total and not any(v.due(now) for v in self.viewers):
            return
        self.counted = total
        message = {
            "type": "patch",
            "from": shown,
            "version": step.snapshot.version,
            "viewers": total,
            "events": news,
            "data": step.patch if moved else None,
        }
        # Each form a page takes, encoded once for all the pages that take it, and only if one
        # does (every form when other processes have pages: they forward what they are sent).
        followed = any(n for n, at in self.others.values() if now - at < REPORT_STALE)
        forms = set(FORMS) if followed else {viewer.form for viewer in self.viewers}
        encoded: dict[str, str | bytes] = {}
        if forms & {"plain", "deflate"}:
            text = orjson.dumps(message)
            if "plain" in forms:
                encoded["plain"] = text.decode()
            if "deflate" in forms:
                # Compressed once for every page that asked (a tenth of the bytes on the class's
                # network), not per socket as per-message deflate would.
                encoded["deflate"] = zlib.compress(text, PUSH_COMPRESSION)
        if "brief" in forms:
            encoded["brief"] = orjson.dumps({**message, "type": "changed", "data": None, "moved": moved}).decode()
        if "told" in forms:
            # A page about one subject is only told when it has something to re-read.
            encoded["told"] = orjson.dumps({**message, "type": "changed", "data": None, "moved": True}).decode()
        if followed:
            await layer.group_send(
                _pushes_group(self.league_id),
                {
                    "type": "live.push",
                    "from": shown,
                    "version": step.snapshot.version,
                    "viewers": total,
                    "moved": moved,
                    "named": sorted(named),
                    "forms": encoded,
                },
            )
        for viewer in list(self.viewers):
            if viewer.about is None or viewer.tell(moved, named, now):
                viewer.offer(encoded[viewer.form])

    def forward(self, message: dict[str, Any]) -> None:
        """A follower's pages sent what the lead published (each in the form it takes)."""
        forms, moved = message.get("forms") or {}, bool(message.get("moved"))
        version = message.get("version")
        if not isinstance(version, str) or not isinstance(forms, dict):
            return
        if version != self.version:
            self.moved_from = message.get("from") if moved else None
            self.version, self.snapshot_json, self.moved_json = version, None, None
            self.moved_plain = forms.get("plain")  # (a later push of the same version has no patch)
        self.published, self.published_count = forms, message.get("viewers") or 0
        named, now = set(message.get("named") or ()), self.loop.time()
        for viewer in list(self.viewers):
            if viewer.form in forms and (viewer.about is None or viewer.tell(moved, named, now)):
                viewer.offer(forms[viewer.form])

    def tell_due(self) -> None:
        """A follower's pages about one subject told of the league's other changes now and then
        (``BRIEF_EVERY``), as the lead's are at its pushes."""
        told, now = self.published.get("told"), self.loop.time()
        for viewer in list(self.viewers):
            if told is not None and viewer.about is not None and viewer.due(now):
                viewer.pending, viewer.told_at = False, now
                viewer.offer(told)


# The forms a push is encoded in (``LeagueConsumer.form``).
FORMS = ("plain", "deflate", "brief", "told")


def _pushes_group(league_id: str) -> str:
    """The group of a league's followers: the audiences of other processes (``Audience``)."""
    return f"{group_name(league_id)}.pushes"


def _lease_key(league_id: str) -> str:
    return f"live:lead:{league_id}"


def _sync(function: Any) -> Any:
    # The cache's calls on a thread of their own (Django's async cache methods take the thread
    # that the ORM's sync calls share).
    return sync_to_async(function, thread_sensitive=False)


def _claim_lease(league_id: str, channel: str) -> str | None:
    """The channel that leads the league's audiences: ``channel`` when it took the lease no one
    held, else the holder's (None when the lease lapsed meanwhile: the next wake claims it)."""
    key = _lease_key(league_id)
    if cache.add(key, channel, LEASE):
        return channel
    holder = cache.get(key)
    return holder if isinstance(holder, str) else None


def _renew_lease(league_id: str, channel: str) -> bool:
    """Whether ``channel`` still leads (its lease renewed, or taken again after it lapsed)."""
    key = _lease_key(league_id)
    holder = cache.get(key)
    if holder == channel:
        return cache.touch(key, LEASE)
    return holder is None and cache.add(key, channel, LEASE)


def _release_lease(league_id: str, channel: str) -> None:
    key = _lease_key(league_id)
    if cache.get(key) == channel:
        cache.delete(key)


# The audiences of this process, by league id: each removes itself when its last viewer leaves.
_audiences: dict[str, Audience] = {}


def viewers_of(league_id: str) -> list[LeagueConsumer]:
    """This process's viewers of the league (its open pages' consumers)."""
    audience = _audiences.get(league_id)
    return list(audience.viewers) if audience else []


def viewer_count(league_id: str) -> int:
    """How many viewers this process has of the league."""
    audience = _audiences.get(league_id)
    return len(audience.viewers) if audience else 0


class LeagueConsumer(AsyncJsonWebsocketConsumer):
    """ws/leagues/<league_id>/: {"type": "snapshot", "version", "viewers", "data"} first, then
    {"type": "patch", "from", "version", "viewers", "events", "data"} per change (``data``: the
    patch, ``league.api.live.diff``). With ``?at=<version>`` (the version the page shows) the
    first message is a patch from that version when the server can make one (``Audience.opening``:
    ``data`` null when the page is current), else the snapshot. With ``?deflate=1`` (the league
    page, where the browser has ``DecompressionStream``) each patch comes as a binary frame: the
    same JSON, compressed with zlib (RFC 1950, the browser's "deflate"). With ``?brief=1`` (pages that re-read
    themselves) only {"type": "changed", "version", "moved", "viewers", "events"}; with
    ``&about=<id>`` too (a page about one player, referee or match) only when a change names that
    id, or at most every ``BRIEF_EVERY`` seconds when the league changed otherwise."""

    # No channel of its own: the audience is the league's one member of its group here, and a
    # channel per page would be one more receiver for the layer to keep (the in-memory layer looks
    # through every channel at each send) and one more task per page. A consumer uses the layer
    # named by ``channel_layer_alias``, and none when CHANNEL_LAYERS has no layer of that name.
    channel_layer_alias = "none"
    audience: Audience | None = None
    brief = False
    deflate = False
    about: str | None = None  # the id a brief page is about (its events are told at once)
    pending = False  # a change this page was not told of yet (``about``)
    told_at = 0.0  # when this page was last told of a change (the event loop's time; ``about``)
    sending: asyncio.Task | None = None

    def due(self, now: float) -> bool:
        """Whether a change this page was not told of is now to be told (``BRIEF_EVERY``)."""
        return self.pending and now - self.told_at >= BRIEF_EVERY

    @property
    def form(self) -> str:
        """Which encoding of a push this page takes (``Audience.push``)."""
        if self.about is not None:
            return "told"
        if self.brief:
            return "brief"
        return "deflate" if self.deflate else "plain"

    def tell(self, moved: bool, named: set[str], now: float) -> bool:
        """Whether to tell this page (``about``) of a push that ``moved`` the league and whose
        events ``named`` these ids, and if so, record that it was told; one it is not told of is
        remembered (``due``)."""
        self.pending = self.pending or moved
        if self.about in named or self.due(now):
            self.pending, self.told_at = False, now
            return True
        return False

    def offer(self, message: str | bytes) -> None:
        """Send ``text`` unless this page is still taking the previous push: a slow page (a
        phone on a weak network) never holds up the others, and skips patches instead of
        queueing them; the next patch it takes does not follow its version, so it asks for the
        snapshot again."""
        if self.sending is not None and not self.sending.done():
            return
        self.sending = asyncio.create_task(self.deliver(message))

    async def deliver(self, message: str | bytes) -> None:
        """Send one push; a page that has gone meanwhile is not an error (ASGI servers raise an
        ``OSError`` for a send on a closed socket; its disconnect takes it out of the audience)."""
        with contextlib.suppress(OSError):
            if isinstance(message, bytes):
                await self.send(bytes_data=message)
            else:
                await self.send(text_data=message)

    async def connect(self) -> None:
        league_id = self.scope["url_route"]["kwargs"]["league_id"]
        asked = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        self.brief, self.deflate = "1" in asked.get("brief", ()), "1" in asked.get("deflate", ())
        about = asked.get("about", [""])[0]
        if self.brief and 0 < len(about) <= ABOUT_MAX:
            self.about = about
            self.told_at = asyncio.get_running_loop().time()  # the page was just read
        if league_id_problem(league_id) is not None:  # channel groups cannot carry other names
            snapshot = await database_sync_to_async(live.current)(league_id)
            if snapshot is None:
                await self.close(code=4404)
                return
            await self.accept()
            await self.send(text_data=_snapshot_text(snapshot.version, 1, snapshot.blob.decode()))
            return
        audience = await Audience.open(league_id)
        if audience is None:
            await self.close(code=4404)
            return
        await self.accept()
        self.audience = audience
        opening = await audience.add(self, asked.get("at", [None])[0])
        if not self.brief:
            await self.send(text_data=opening)

    async def disconnect(self, code: int) -> None:
        if self.audience is not None:
            await self.audience.leave(self)
            self.audience = None

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        # The only thing a viewer may ask for is the whole state again (a page whose version
        # does not match a patch's "from", or a hidden tab that wakes).
        if isinstance(content, dict) and content.get("type") == "snapshot" and self.audience is not None:
            await self.send(text_data=await self.audience.snapshot_text())


def _league_ids() -> list[str]:
    ids = League.objects.values_list("league_id", flat=True)
    return [league_id for league_id in ids if league_id_problem(league_id) is None]


class LeagueListConsumer(AsyncJsonWebsocketConsumer):
    """ws/leagues/: {"type": "event", "event": …, "data": {"league_id": …}} for any league."""

    groups_joined: set[str]

    async def connect(self) -> None:
        self.groups_joined = set()
        # The groups first: the page counts itself live once the socket opens, and an event sent
        # from then on must reach it (joined after the accept, one sent meanwhile was lost).
        await self._join([LEAGUES_GROUP, *map(group_name, await database_sync_to_async(_league_ids)())])
        await self.accept()

    async def _join(self, groups: list[str]) -> None:
        for group in groups:
            if group not in self.groups_joined:
                await self.channel_layer.group_add(group, self.channel_name)
                self.groups_joined.add(group)
                events.joined(group)

    async def disconnect(self, code: int) -> None:
        for group in getattr(self, "groups_joined", ()):
            await self.channel_layer.group_discard(group, self.channel_name)
            events.left(group)

    async def league_events(self, message: dict[str, Any]) -> None:
        """The events of one commit (``events.layer_messages``), each in turn."""
        for item in events.events_of(message):
            data = item.get("data") or {}
            league_id = data.get("league_id")
            if (
                item.get("event") == "league_created"
                and isinstance(league_id, str)
                and not league_id_problem(league_id)
            ):
                await self._join([group_name(league_id)])
            await self.send_json({"type": "event", "event": item.get("event"), "data": data})
