"""The relay: players that cannot accept inbound connections connect out to the LM and answer
over a WebSocket the JSON-RPC calls the LM and referees make to their relay endpoint.

A player registers with ``contact_endpoint: "connect"``; the LM gives it the endpoint
``<LM>/relay/<league_id>/<player_id>/mcp``, built from configuration (league/relayaddress.py),
which referees and the conductor call like any other. ``endpoint.py`` (an ASGI application)
checks each call (Django's Host check and headers: league/sitechecks.py; its shape; its caller, the
League Manager or the player's referee: ``callers.py``) and forwards it to the consumer holding
the player's socket (``consumer.py``, an ASGI WebSocket: in this process directly, in another
through the channel layer), which sends it down the socket and sends the reply back.
``state.py`` keeps the socket's whereabouts in the database (the dashboard shows them; another
LM process finds the socket's channel there, and hears when it moves). With Redis, calls and
replies cross LM processes on the relay's own channel layer, Redis pub/sub (``layer.py``).
docs/protocol.md, "Playing from behind NAT", is the agent's side of it.
"""
