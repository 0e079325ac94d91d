"""``bench league --connect``: the same league played twice in one run, first with every player
serving its own endpoint (direct HTTP), then with every player connecting out to the LM's relay
(league/relay/), and what the relay costs: wall time, CPU and the latency of each referee call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from league.bench.league_run import LeagueBench

# What the comparison reads of each league's report.
_TOTALS = ("wall_seconds", "matches_per_second", "calls_per_second", "cpu_seconds_league")


def compare(make: Callable[[bool], LeagueBench]) -> dict[str, Any]:
    """Run ``make(False)`` (direct) then ``make(True)`` (relay); both reports and the overhead."""
    direct = make(False).run()
    relay = make(True).run()
    return {"direct": direct, "relay": relay, "relay_overhead": overhead(direct, relay)}


def overhead(direct: dict[str, Any], relay: dict[str, Any]) -> dict[str, Any]:
    """The relay league against the direct one: each total side by side with its ratio, and the
    added latency (ms) of each kind of referee → player call at p50 and p95."""
    totals = {}
    for key in _TOTALS:
        a, b = direct.get(key) or 0.0, relay.get(key) or 0.0
        totals[key] = {"direct": a, "relay": b, "ratio": round(b / a, 3) if a else None}
    latency = {}
    for kind, by_relay in relay["latency_ms"].items():
        by_direct = direct["latency_ms"].get(kind)
        if not kind.startswith("referee->") or by_direct is None:
            continue
        latency[kind] = {f"added_{p}_ms": round(by_relay[p] - by_direct[p], 3) for p in ("p50", "p95") if p in by_relay}
    return {"totals": totals, "added_latency": latency}
