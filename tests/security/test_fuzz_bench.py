"""``bench fuzz`` (league/bench/fuzz.py) as the suite runs it: a few hundred generated invalid
requests over the real LM, ``runreferee``, ``runplayer`` and a ``runplayer --connect`` behind the
LM's relay. The bench's own verdict is what the 100,000-request run reports."""

from __future__ import annotations

import random

import pytest

from league.bench.fuzz import FuzzBench, make_case

KINDS = {"bad_json", "wrong_types", "deep", "huge", "wrong_verb", "content_type", "batch", "unknown", "bad_token"}


def test_the_generated_requests_cover_every_kind_and_repeat_from_a_seed():
    rng_a, rng_b = random.Random(7), random.Random(7)
    cases = [make_case(rng_a, "L") for _ in range(500)]
    again = [make_case(rng_b, "L") for _ in range(500)]
    assert {c.kind for c in cases} == KINDS
    # The same seed, the same requests (bar the fresh random tokens they carry).
    assert [(c.kind, c.verb, c.content_type) for c in cases] == [(c.kind, c.verb, c.content_type) for c in again]


@pytest.mark.processes
def test_invalid_requests_get_no_5xx_and_change_nothing(agent_env, tmp_path):
    report = FuzzBench(requests=240, concurrency=4, seed=1, env=agent_env, log_dir=tmp_path).run()
    counts = report["status_by_target"]
    assert set(counts) == {"lm", "referee", "player", "relay"}
    assert sum(sum(c.values()) for c in counts.values()) == 240
    for target in ("lm", "referee", "player", "relay"):
        assert report["server_errors"][target] == 0 and report["transport_errors"][target] == 0, report
    assert report["state_changes"] == [] and report["errors"] == [], report
    assert report["relay_socket_dropped"] is False
