"""The league page served beside Django's views (league/pages/endpoint.py): the same answer as
Django's view gives, byte for byte and header for header, without Django's request cycle; what it
does not serve (another method, a league that does not exist, a refused Host) answered as Django
answers it."""

from __future__ import annotations

import re

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.core.asgi import get_asgi_application
from django.core.cache import cache
from django.core.signals import request_started

from league.actions.arena import open_arena
from leaguesite.asgi import application
from tests.browser.league_data import make_league
from tests.league import lm_support

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def own_cache(settings) -> None:
    """A cache of these tests' own, which ``answer`` clears so that each app renders the page
    itself: Django's Redis cache clears by flushing its whole database, every worker's keys."""
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "pages"}}


# Django's answer, through its own ASGI handler and every middleware of the site.
django_only = get_asgi_application()


async def answer(app, method: str, path: str, host: str = "testserver") -> httpx.Response:
    await sync_to_async(cache.clear)()  # each app renders the page itself
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=f"http://{host}") as client:
        return await client.request(method, path)


# The registration command a page shows carries the time it was rendered (to the second).
CLOCK = re.compile(rb"(&quot;timestamp&quot;: &quot;)[^&]*(&quot;)")


def without_clock(page: bytes) -> bytes:
    return CLOCK.sub(rb"\1\2", page)


def same_answer(ours: httpx.Response, djangos: httpx.Response, *, exactly: bool = True) -> None:
    """The same status and headers, and (``exactly``) the same bytes; a page with a nonce of its
    own (Django's CSRF failure page) differs by it alone."""
    assert ours.status_code == djangos.status_code
    if exactly:
        assert without_clock(ours.content) == without_clock(djangos.content)
        assert sorted(ours.headers.multi_items()) == sorted(djangos.headers.multi_items())
    else:
        assert sorted(ours.headers) == sorted(djangos.headers)


def open_arena_league() -> None:
    open_arena(lm_support.make_league("arena_1", open_seconds=None, schedule_format="arena"))


@pytest.mark.parametrize("method", ["GET", "HEAD"])
async def test_a_league_page_is_the_one_djangos_view_serves(method):
    await sync_to_async(make_league)("spring_cup", players=6)
    ours = await answer(application, method, "/leagues/spring_cup/")
    assert ours.status_code == 200 and (method == "HEAD" or b"spring_cup" in ours.content)
    assert "'self'" in ours.headers["content-security-policy"] and ours.headers["x-frame-options"] == "DENY"
    same_answer(ours, await answer(django_only, method, "/leagues/spring_cup/"))


async def test_an_arenas_page_is_the_one_djangos_view_serves():
    await sync_to_async(open_arena_league)()
    ours = await answer(application, "GET", "/arenas/arena_1/")
    assert ours.status_code == 200 and b"Leaderboard" in ours.content
    same_answer(ours, await answer(django_only, "GET", "/arenas/arena_1/"))


async def test_a_league_page_does_not_go_through_djangos_request_cycle():
    """What a class opening the page together saves: no thread and middleware hand-offs a page.
    A league that does not exist still goes to Django's view (its 404 page)."""
    await sync_to_async(make_league)("spring_cup", players=4)
    started: list[str] = []

    def note(sender, environ=None, scope=None, **kwargs) -> None:
        started.append((scope or {}).get("path", "?"))

    request_started.connect(note)
    try:
        assert (await answer(application, "GET", "/leagues/spring_cup/")).status_code == 200
        assert (await answer(application, "GET", "/leagues/autumn_cup/")).status_code == 404
    finally:
        request_started.disconnect(note)
    assert started == ["/leagues/autumn_cup/"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/leagues/autumn_cup/"),  # no such league: Django's 404 page
        ("GET", "/arenas/autumn_cup/"),
        ("POST", "/leagues/spring_cup/"),  # not a page's method: Django's (its CSRF check)
        ("GET", "/leagues/spring_cup"),  # no slash: Django's redirect (APPEND_SLASH)
    ],
)
async def test_what_it_does_not_serve_is_answered_as_django_answers_it(method, path):
    await sync_to_async(make_league)("spring_cup", players=4)
    ours = await answer(application, method, path)
    same_answer(ours, await answer(django_only, method, path), exactly=method == "GET")


async def test_a_host_django_refuses_is_refused():
    await sync_to_async(make_league)("spring_cup", players=4)
    ours = await answer(application, "GET", "/leagues/spring_cup/", host="evil.example")
    assert ours.status_code == 400 and b"spring_cup" not in ours.content
    assert (await answer(django_only, "GET", "/leagues/spring_cup/", host="evil.example")).status_code == 400


async def test_a_failed_read_is_tried_again_by_djangos_view(monkeypatch, caplog):
    """A database restarting fails the first read on a reading thread (its connection closed with
    it): the viewer is answered by Django's view, which reads again, not sent a bare 500."""
    from django.db import OperationalError

    from league.pages import endpoint

    await sync_to_async(make_league)("spring_cup", players=4)
    failed: list[str] = []

    def fails(request, league_id, mcp_url):
        failed.append(league_id)
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(endpoint, "kept_league_page", fails)
    with caplog.at_level("WARNING", logger="league.pages.endpoint"):
        ours = await answer(application, "GET", "/leagues/spring_cup/")
    assert failed == ["spring_cup"]
    assert ours.status_code == 200 and b"spring_cup" in ours.content
    assert "server closed the connection" in caplog.text
