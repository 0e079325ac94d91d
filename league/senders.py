"""How the League Manager names itself to each agent (docs/protocol.md, "Who an agent is").

The course prints the LM's sender as ``league_manager``, and that is what we send. Some agents
accept only the other printed spelling, ``league_manager:<id>``, and refuse everything else with
an error naming the sender. Such an agent is sent the same message again once with
``ALTERNATE`` and, when that is taken, gets ``ALTERNATE`` from then on (``Player.lm_sender``):
learned once per agent from a refusal, never guessed per message.
"""

from __future__ import annotations

from typing import Any

from leagueproto.client import CallFailed

DEFAULT = "league_manager"
ALTERNATE = "league_manager:LM01"


def sender_for(lm_sender: str) -> str:
    """The sender to write to an agent whose learned spelling is ``lm_sender`` ("" : the default)."""
    return lm_sender or DEFAULT


def _mentions_sender(value: Any) -> bool:
    if isinstance(value, str):
        text = value.lower()
        return "sender" in text or "league_manager" in text
    if isinstance(value, dict):
        return any(_mentions_sender(v) for v in value.values())
    if isinstance(value, list):
        return any(_mentions_sender(v) for v in value)
    return False


def refuses_sender(reply: dict[str, Any] | None, failure: CallFailed | None = None) -> bool:
    """Whether an agent's answer refuses the message for its sender: an error reply (LEAGUE_ERROR,
    GAME_ERROR, any ``error_code``) or a JSON-RPC error whose text names the sender."""
    if failure is not None:
        return failure.rpc_error is not None and _mentions_sender(failure.rpc_error)
    if not isinstance(reply, dict):
        return False
    fields = {k: reply.get(k) for k in ("error_code", "error_description", "error", "message", "context", "reason")}
    return any(v is not None for v in fields.values()) and _mentions_sender(fields)
