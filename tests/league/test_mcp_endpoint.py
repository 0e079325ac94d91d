"""``/mcp`` beside Django (league/mcp/endpoint.py): Django judges its Host and adds its security
headers as for any view; its database work runs on one thread that keeps its connection, and a
connection an outage broke is replaced (league/mcp/database.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import HttpCommunicator
from django.db import OperationalError, connection
from django.test import Client

from league.mcp.database import database_job
from league.mcp.endpoint import McpEndpoint
from league.models import League

SECURITY = ("x-content-type-options", "x-frame-options", "referrer-policy", "cross-origin-opener-policy")


async def _answer(method: str, host: bytes, body: bytes = b"") -> dict[str, Any]:
    headers = [(b"host", host), (b"content-type", b"application/json")]
    communicator = HttpCommunicator(McpEndpoint(), method, "/mcp", body=body, headers=headers)
    communicator.scope["server"] = ("127.0.0.1", 8000)
    communicator.scope["client"] = ("127.0.0.1", 50000)
    return await communicator.get_response()


def test_a_host_django_refuses_is_400(settings):
    settings.ALLOWED_HOSTS = ["league.example.org"]
    assert async_to_sync(_answer)("POST", b"evil.example", b"{}")["status"] == 400


def test_its_answers_carry_the_headers_djangos_middleware_adds(settings):
    settings.X_FRAME_OPTIONS = "SAMEORIGIN"
    page = Client().get("/no-such-page/")  # a Django page, through the site's middleware
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    answer = async_to_sync(_answer)("POST", b"localhost", ping)
    assert answer["status"] == 200
    assert json.loads(answer["body"]) == {"jsonrpc": "2.0", "id": 1, "result": {}}
    headers = {k.decode(): v.decode() for k, v in answer["headers"]}
    assert {n: headers[n] for n in SECURITY if n in headers} == {n: page.headers[n] for n in SECURITY if n in page}
    assert headers["x-frame-options"] == "SAMEORIGIN"
    assert int(headers["content-length"]) == len(answer["body"])


@pytest.mark.django_db(transaction=True)
def test_database_jobs_share_one_connection_and_an_outage_replaces_it():
    def held() -> int:
        connection.ensure_connection()
        return id(connection.connection)

    def lost() -> None:
        connection.ensure_connection()
        raise OperationalError("server closed the connection unexpectedly")

    first = async_to_sync(database_job)(held)
    assert async_to_sync(database_job)(held) == first  # kept from one call to the next
    with pytest.raises(OperationalError):
        async_to_sync(database_job)(lost)
    assert async_to_sync(database_job)(lambda: connection.connection is None)  # closed by the failure
    assert async_to_sync(database_job)(League.objects.count) == 0  # and the next job opens another
