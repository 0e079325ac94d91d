"""A JSON-RPC batch: its items run concurrently and are answered in the order they came."""

from __future__ import annotations

import asyncio

from leagueproto.jsonutil import dumps, loads
from leagueproto.server import McpServer
from leagueproto.tools import CallContext, Toolset

BATCH = 5


def barrier_toolset(barrier: asyncio.Barrier, order: list[int]) -> Toolset:
    toolset = Toolset(name="test-barrier", sender="player:P01", error_message_type="GAME_ERROR")

    @toolset.tool("meet", envelope=False)
    async def meet(msg, ctx: CallContext) -> dict:
        """Waits until every item of the batch has arrived: sequential items would wait forever."""
        await barrier.wait()
        order.append(ctx.request_id)
        return {"status": "ok", "seen": ctx.request_id}

    return toolset


async def test_a_batch_runs_its_items_concurrently_and_answers_in_request_order():
    barrier = asyncio.Barrier(BATCH)
    finished: list[int] = []
    server = McpServer(barrier_toolset(barrier, finished))
    # Ids in descending order: the responses follow the requests, not the order items finish.
    batch = [{"jsonrpc": "2.0", "id": i, "method": "meet", "params": {}} for i in reversed(range(BATCH))]
    batch.insert(2, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    status, encoded, _ = await asyncio.wait_for(
        server.handle_payload(batch, CallContext(method="", dialect="direct")), 10
    )
    responses = loads(dumps(encoded))  # each response comes encoded (its size counted against the bound)
    assert status == 200
    assert [r["id"] for r in responses] == list(reversed(range(BATCH)))
    assert [r["result"]["seen"] for r in responses] == list(reversed(range(BATCH)))
    assert sorted(finished) == list(range(BATCH))
