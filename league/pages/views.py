"""The public pages: thin views over :mod:`league.api.readmodel` (the same data the API serves)."""

from __future__ import annotations

import hashlib
import json
import logging
import shlex
import threading
import time
import uuid
from collections import OrderedDict

from django.conf import settings
from django.core.cache import cache
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.safestring import mark_safe

from league.api import live, profiles, readmodel
from league.api.views import leagues_with_counts
from league.mcp.database import page_read
from league.mcp.endpoint import MCP_PATH
from league.models import League, MatchResult, Player, Referee

log = logging.getLogger(__name__)


def league_list(request: HttpRequest) -> HttpResponse:
    leagues = list(leagues_with_counts())
    for league in leagues:
        league.percent = readmodel.percent_done(league.matches_finished, league.matches_total, league.status)
        league.url = _league_url(league.league_id)
        league.open_now = league.registration_open()
        league.closes_iso = readmodel.iso(league.registration_closes_at)
        league.players_text = readmodel.headcount(
            "player", league.players_live, league.players_suspended, league.players_exited
        )
        league.referees_text = readmodel.headcount(
            "referee", league.referees_live, league.referees_suspended, league.referees_exited
        )
        # The league page's warning, on the card too: a league in play that no referee can play.
        league.referee_warning = readmodel.referee_warning(league)
    active = any(league.status in readmodel.ACTIVE_LEAGUE for league in leagues)
    return render(request, "league/league_list.html", {"leagues": leagues, "active": active})


def _league_url(league_id: str) -> str | None:
    """The league page's address; None for an id no URL can carry (a "/" stored before ids were
    checked): the card then says so instead of the whole list failing."""
    try:
        return reverse("league-detail", args=[league_id])
    except NoReverseMatch:
        return None


AGENT_URL_PLACEHOLDER = "<YOUR-AGENT-URL>"
AGENT_URL_SLOT = "AGENT-URL-SLOT"  # marks the address's place in the JSON before quoting


def registration_command(mcp_url: str, league_id: str, game_type: str) -> str:
    """The course's registration message, with this league's id, as a curl command to paste."""
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "register_player",
        "params": {
            "protocol": "league.v2",
            "message_type": "LEAGUE_REGISTER_REQUEST",
            "sender": "player:alpha",
            "timestamp": timezone.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
            "conversation_id": "conv-player-alpha-reg-001",
            "league_id": league_id,
            "player_meta": {
                "display_name": "Agent Alpha",
                "version": "1.0.0",
                "game_types": [game_type],
                "contact_endpoint": AGENT_URL_SLOT,
            },
        },
    }
    body = shlex.quote(json.dumps(message, indent=2, ensure_ascii=False))
    # The agent's address stands outside the quotes: pasted unedited, the shell reads
    # "<YOUR-AGENT-URL>" as a redirection from a file that does not exist and runs nothing,
    # so no seat is taken for an address where nothing listens.
    body = body.replace(AGENT_URL_SLOT, f"'{AGENT_URL_PLACEHOLDER}'")
    return f"curl -s {shlex.quote(mcp_url)} \\\n  -H 'Content-Type: application/json' \\\n  -d {body}"


_rendering = threading.Lock()  # one rendering at a time; the others take what it made
# The kept pages' bytes in this process, by league page, with the rendering they come from (a
# token of its own: a page is never served from here for another rendering). What the cache
# shares between processes (Redis) is a small record per page, (version, checked at, token), and
# the bytes once per rendering: a viewer costs no 250 KB read from Redis, and the page's bytes
# are read from it once per rendering a process did not make itself.
_pages: OrderedDict[str, tuple[str, bytes]] = OrderedDict()
_pages_lock = threading.Lock()
PAGES_KEPT = 32  # leagues' pages kept in a process (a page of 100 players is ~250 KB)


async def league_detail(request: HttpRequest, league_id: str) -> HttpResponse:
    """The league page, rendered at most once per league version (and at most once per
    ``LIVE_PAGE_FRESH`` seconds while the league moves on) and shared by every viewer, like the
    snapshot it shows (``league.api.live``): a class opening the page together costs one
    rendering, not one each. A page younger than ``LIVE_PAGE_FRESH`` is served without asking the
    league's version (a few aggregate queries: 500 viewers arriving within seconds would each
    pay them); an older one is brought up to date by one request while the others are served it
    as it is (their websocket brings each page to the current version at once). The reading is
    done on the pages' own threads (``page_read``: their connections kept, never in line before
    /mcp's writes). The LM's server sends the same page beside Django's request cycle
    (league/pages/endpoint.py); this view answers what that leaves to Django (a league that does
    not exist, another method, a read that failed there) and Django's own handlers."""
    mcp_url = request.build_absolute_uri(MCP_PATH)
    return HttpResponse(await page_read(kept_league_page, request, league_id, mcp_url))


def kept_league_page(request: HttpRequest, league_id: str, mcp_url: str) -> bytes:
    """The page of ``league_id`` as kept (``league_detail``), brought up to date if it is not fresh."""
    # The league itself (its row and creation), not only its id: a league deleted and made again
    # under the same id is another page, however recently the first was rendered.
    identity = League.objects.filter(league_id=league_id).values_list("pk", "created_at").first()
    if identity is None:
        raise Http404(f"no league {league_id!r}")
    name = f"{league_id} {identity} {mcp_url}"
    key = f"live-page:{hashlib.blake2b(name.encode(), digest_size=8).hexdigest()}"
    kept = _kept(key)
    if kept is not None and time.time() - kept[1] < settings.LIVE_PAGE_FRESH:
        return kept[2]
    # Only a viewer with no page to be served waits for the rendering.
    if not _rendering.acquire(blocking=kept is None):
        return kept[2]
    try:
        return _brought_up_to_date(request, league_id, key, mcp_url)[2]
    finally:
        _rendering.release()


Kept = tuple[str, float, bytes, str]  # a kept page: version, checked at, page, its rendering's token


def _brought_up_to_date(request: HttpRequest, league_id: str, key: str, mcp_url: str) -> Kept:
    """The page kept under ``key``, at the league's current version: rendered again only when
    the version moved, else marked fresh again."""
    kept = _kept(key)  # (brought up to date while this request waited)
    if kept is not None and time.time() - kept[1] < settings.LIVE_PAGE_FRESH:
        return kept
    at = live.version(league_id)
    if at is None:
        raise Http404(f"no league {league_id!r}")
    if kept is not None and kept[0] == at:
        kept = (at, time.time(), kept[2], kept[3])
        cache.touch(_page_key(key, kept[3]), live.SNAPSHOT_TTL)
    else:
        version, page = _render_league(request, league_id, mcp_url)
        kept = (version, time.time(), page, uuid.uuid4().hex)
        cache.set(_page_key(key, kept[3]), page, live.SNAPSHOT_TTL)  # (before the record that names it)
        _remember(key, kept[3], page)
    cache.set(key, kept[:2] + kept[3:], live.SNAPSHOT_TTL)
    return kept


def _kept(key: str) -> Kept | None:
    """The page kept under ``key``, its bytes from this process when it holds that rendering;
    None when there is none (or its bytes are gone from the cache)."""
    record = cache.get(key)
    if record is None or not isinstance(record[-1], str):  # (none, or not a record of this shape)
        return None
    version, checked_at, token = record
    with _pages_lock:
        held = _pages.get(key)
    if held is not None and held[0] == token:
        return version, checked_at, held[1], token
    page = cache.get(_page_key(key, token))
    if page is None:
        return None
    _remember(key, token, page)
    return version, checked_at, page, token


def _page_key(key: str, token: str) -> str:
    return f"{key}:{token}"


def _remember(key: str, token: str, page: bytes) -> None:
    with _pages_lock:
        _pages[key] = (token, page)
        _pages.move_to_end(key)
        while len(_pages) > PAGES_KEPT:
            _pages.popitem(last=False)


def _render_league(request: HttpRequest, league_id: str, mcp_url: str) -> tuple[str, bytes]:
    snapshot = live.current(league_id)
    if snapshot is None:
        raise Http404(f"no league {league_id!r}")
    data = snapshot.data()
    context = {
        "s": data,
        "snapshot_json": _script_json(snapshot.blob),
        "league_id": league_id,
        "version": snapshot.version,  # the page's socket asks for what changed since (league.js)
        "mcp_url": mcp_url,
        "curl": registration_command(mcp_url, league_id, data["league"]["game_type"]),
    }
    # An arena (schedule_format "arena") has its leaderboard page instead (league/api/arenaboard.py).
    template = "league/arena_detail.html" if "leaderboard" in data else "league/league_detail.html"
    log.debug("rendered the page of %s at version %s", league_id, snapshot.version)
    # Kept encoded: each viewer's response is these bytes as they are.
    return snapshot.version, render_to_string(template, context, request).encode()


# What json_script escapes, so that the JSON cannot end its <script> element.
_SCRIPT_ESCAPES = ((b"&", b"\\u0026"), (b"<", b"\\u003C"), (b">", b"\\u003E"))


def _script_json(blob: bytes) -> str:
    """JSON already encoded, made safe inside <script> as ``json_script`` makes it."""
    for char, escaped in _SCRIPT_ESCAPES:
        blob = blob.replace(char, escaped)
    return mark_safe(blob.decode())  # noqa: S308 (escaped above, as json_script does)


def match_detail(request: HttpRequest, league_id: str, match_id: str) -> HttpResponse:
    league = get_object_or_404(League, league_id=league_id)
    match = get_object_or_404(readmodel.matches_queryset(league), match_id=match_id)
    try:
        log = match.result.log or []
    except MatchResult.DoesNotExist:
        log = []
    return render(
        request,
        "league/match_detail.html",
        {"league": league, "m": readmodel.match_summary(match), "log": _log_rows(log)},
    )


# The keys the match page shows of each log entry; a referee may leave any of them out.
LOG_KEYS = ("seq", "at", "t_ms", "direction", "peer", "method", "message_type", "outcome", "attempt", "latency_ms")


def _log_rows(log: list) -> list[dict]:
    """Log entries with a few display helpers; entries are whatever the referee reported."""
    rows = []
    for entry in log if isinstance(log, list) else []:
        if not isinstance(entry, dict):
            continue
        message = entry.get("message")
        rows.append(
            {
                **dict.fromkeys(LOG_KEYS),
                **entry,
                "failed": entry.get("outcome") not in (None, "ok"),
                "retry": isinstance(entry.get("attempt"), int) and entry["attempt"] > 1,
                "message_json": json.dumps(message, indent=2, ensure_ascii=False, default=str),
            }
        )
    return rows


def player_detail(request: HttpRequest, league_id: str, player_id: str) -> HttpResponse:
    player = get_object_or_404(
        Player.objects.select_related("league"), league__league_id=league_id, player_id=player_id
    )
    # ``agent``: the row itself, for how the player is reached (direct, or the relay and its socket).
    context = {
        "league": player.league,
        "p": profiles.player_profile(player),
        "agent": player,
        "slow_note": profiles.slow_note(player),
    }
    return render(request, "league/player_detail.html", context)


def referee_detail(request: HttpRequest, league_id: str, referee_id: str) -> HttpResponse:
    referee = get_object_or_404(
        Referee.objects.select_related("league"), league__league_id=league_id, referee_id=referee_id
    )
    return render(
        request, "league/referee_detail.html", {"league": referee.league, "r": profiles.referee_profile(referee)}
    )
