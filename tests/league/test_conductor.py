"""The conductor against the real LM site and scripted referees/players over loopback HTTP."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from league.conductor import delivery_log
from league.conductor.common import SUSPEND_AFTER
from league.conductor.sending import Sender
from league.conductor.shared import Shared
from league.conductor.worker import Conductor
from league.models import AgentStatus, Event, League, Match, MatchResult, Player, Referee, Round
from league.standings import ranking_results
from leagueproto.client import AgentClient
from leagueproto.scoring import compute_standings
from tests.league.conductor_support import ScriptedPlayers, ScriptedReferee
from tests.league.lm_support import make_league, player_meta, referee_meta, register_player, register_referee
from tests.support.servers import free_port
from tests.support.silent import SilentAgent

FAST = {
    "join_timeout": 0.5,
    "move_timeout": 0.5,
    "game_over_timeout": 0.5,
    "report_timeout": 0.5,
    "default_timeout": 0.5,
    "retries": 1,
    "retry_delay": 0.05,
    "match_deadline": 10.0,
}


def conduct(league_id: str, timeout: float = 30.0, kind: type[Conductor] = Conductor, **options: Any) -> Conductor:
    """Run a conductor (``kind``: Conductor or a test's subclass) until the league is done."""
    worker = kind(league_id=league_id, poll=0.02, **options)

    async def main() -> None:
        await asyncio.wait_for(worker.run(until_done=True), timeout)

    asyncio.run(main())
    return worker


@pytest.fixture
def players():
    started = []

    def make(count: int) -> ScriptedPlayers:
        group = ScriptedPlayers(count).start()
        started.append(group)
        return group

    yield make
    for group in started:
        group.stop()


@pytest.fixture
def referees(lm_server):
    started = []

    def make(**kwargs) -> ScriptedReferee:
        referee = ScriptedReferee(lm_server, **kwargs).start()
        started.append(referee)
        return referee

    yield make
    for referee in started:
        referee.stop()


def close_window(league: League) -> None:
    from league import actions

    actions.close_registration(league)


def test_it_plays_a_small_league_to_the_end(lm_server, players, referees):
    league = make_league("conductor_full", **FAST)
    group = players(4)
    ids = group.register(lm_server, league.league_id)
    # A fifth player whose endpoint nobody serves any more: it answered once (as at its
    # registration, else it would be withdrawn before the schedule), cannot be notified since,
    # and that never blocks.
    silent = register_player(
        lm_server, "ghost", player_meta=player_meta(f"http://127.0.0.1:{free_port()}/mcp"), league_id=league.league_id
    )
    Player.objects.filter(league=league, player_id=silent["player_id"]).update(answered_at=timezone.now())
    ref_a, ref_b = referees(), referees()
    ref_a.register(league.league_id, capacity=1)
    ref_b.register(league.league_id, capacity=2)
    close_window(league)

    conduct(league.league_id)

    league.refresh_from_db()
    n = 5
    assert league.status == League.Status.COMPLETED
    assert MatchResult.objects.filter(league=league).count() == n * (n - 1) // 2
    assert league.rounds.count() == n and set(league.rounds.values_list("status", flat=True)) == {"COMPLETED"}
    assert league.champion.player_id == "P01"  # the scripted referee lets the lower id win
    assert sorted(s for r in (ref_a, ref_b) for s in r.starts) == sorted(
        set(s for r in (ref_a, ref_b) for s in r.starts)
    )
    assert ref_a.max_running <= 1 and ref_b.max_running <= 2
    assert len(ref_a.starts) and len(ref_b.starts), "both referees got work"

    # Every reachable player saw each round announced, then standings, then completion, in order.
    for port, player_id in ids.items():
        types = group.types(port)
        assert types == ["ROUND_ANNOUNCEMENT", "LEAGUE_STANDINGS_UPDATE", "ROUND_COMPLETED"] * n + [
            "LEAGUE_COMPLETED"
        ], player_id
        notices = group.notices(port)
        final = notices[-1]
        assert final["champion"]["player_id"] == "P01"
        assert final["total_matches"] == 10 and final["total_rounds"] == n
        assert final["auth_token"] and final["sender"] == "league_manager"
        last_update = notices[-3]
        assert [row["player_id"] for row in last_update["standings"]] == [
            r.player_id for r in compute_standings(["P01", "P02", "P03", "P04", "P05"], ranking_results(league))
        ]
        # Each round's table equals a recomputation from the results of that round and the ones
        # before: none of the next round's results is in it.
        updates = [m for m in group.received[port] if m["message_type"] == "LEAGUE_STANDINGS_UPDATE"]
        for update in updates:
            upto = [
                r
                for r in ranking_results(league)
                if Match.objects.get(league=league, match_id=r.match_id).round.number <= update["round_id"]
            ]
            expected = compute_standings(["P01", "P02", "P03", "P04", "P05"], upto)
            assert [(r["rank"], r["player_id"], r["played"], r["points"]) for r in update["standings"]] == [
                (r.rank, r.player_id, r.played, r.points) for r in expected
            ], update["round_id"]
    for referee in (ref_a, ref_b):  # (sent again when its answer came after the timeout)
        assert {m["message_type"] for m in referee.received} == {"LEAGUE_COMPLETED"}
    failed = list(delivery_log.sent(league, agent=silent["player_id"]))
    assert failed and all(d.outcome != "ok" for d in failed)


def test_it_reassigns_a_match_whose_referee_never_reports(lm_server, players, referees):
    league = make_league("conductor_reassign", **{**FAST, "match_deadline": 0.3})
    group = players(2)
    group.register(lm_server, league.league_id)
    mute = referees(silent=True)
    mute.register(league.league_id, capacity=1)
    close_window(league)

    # Only the silent referee at first: it accepts R1M1 and never reports.
    async def run_ticks() -> None:
        client = AgentClient()
        conductor = Conductor(league_id=league.league_id, poll=0.02, client=client)
        async with asyncio.timeout(10):
            while not mute.starts:
                await conductor.tick()
                await asyncio.sleep(0.02)
            await conductor.drain()
        await client.close()

    asyncio.run(run_ticks())
    assert mute.starts[0][0] == "R1M1"
    match = Match.objects.get(league=league, match_id="R1M1")
    assert (match.status, match.attempt) == (Match.Status.RUNNING, 1)

    worker = referees()
    worker.register(league.league_id, capacity=1)
    conduct(league.league_id)

    match.refresh_from_db()
    league.refresh_from_db()
    assert league.status == League.Status.COMPLETED
    assert match.status == Match.Status.FINISHED and match.attempt >= 2
    result = MatchResult.objects.get(match=match)
    assert result.referee.referee_id == worker.registration["referee_id"]
    assert Event.objects.filter(league=league, kind="match_released", match_id="R1M1").exists()
    assert mute.starts[0][1] != worker.starts[-1][1], "a new attempt gets a new match token"

    # The silent referee's late report is refused and changes nothing.
    late = mute.report_message(
        {"player_A_id": "P01", "player_B_id": "P02", "league_id": league.league_id, "round_id": 1,
         "match_id": "R1M1", "game_type": "even_odd"}
    )  # fmt: skip
    late["result"]["winner"] = "P02"
    late["result"]["score"] = {"P02": 3, "P01": 0}
    reply = httpx.post(
        lm_server, json={"jsonrpc": "2.0", "id": 1, "method": "report_match_result", "params": late}, timeout=5
    ).json()["result"]
    assert reply["message_type"] == "LEAGUE_ERROR"
    assert MatchResult.objects.filter(match=match).count() == 1
    assert MatchResult.objects.get(match=match).winner.player_id == "P01"


def test_it_suspends_a_referee_that_keeps_failing(lm_server, players, referees):
    league = make_league("conductor_suspend", **FAST)
    group = players(6)  # round 1 has 3 matches: all go to the referee with the most free capacity
    group.register(lm_server, league.league_id)
    # 0.1 s a match, one at a time: the league lasts 1.5 s or more, and matches wait in the pool
    # most of it, however fast the machine.
    worker = referees(delay=0.1)
    worker.register(league.league_id, capacity=1)
    # A referee registered at an endpoint where nothing listens: start_match fails every time.
    gone = register_referee(
        lm_server,
        "gone",
        referee_meta=referee_meta(f"http://127.0.0.1:{free_port()}/mcp", max_concurrent_matches=5),
        league_id=league.league_id,
    )
    # It answered once (else it would be suspended before the league starts, never answered).
    Referee.objects.filter(league=league, referee_id=gone["referee_id"]).update(answered_at=timezone.now())
    close_window(league)

    # Short cooldowns between its failures (0.05 s, the league's retry delay, then doubling: 0.35 s
    # for three): it is back for more matches, and suspended, within this short league.
    conduct(league.league_id, cooldown_base=0.01)

    league.refresh_from_db()
    assert league.status == League.Status.COMPLETED
    gone_row = Referee.objects.get(league=league, referee_id=gone["referee_id"])
    assert gone_row.status == AgentStatus.SUSPENDED and gone_row.failures >= SUSPEND_AFTER
    recorded_by = set(MatchResult.objects.filter(league=league).values_list("referee__referee_id", flat=True))
    assert recorded_by == {worker.registration["referee_id"]}
    assert MatchResult.objects.filter(league=league).count() == 15


def test_a_referee_that_takes_a_start_match_and_never_answers_is_suspended_at_once(lm_server, players, referees):
    """Finding 5: a referee stopped or cut off (it takes the connection, never answers) gets no
    new match until it answers a ping again, instead of one in each round until it had failed
    ``SUSPEND_AFTER`` times, each waiting out the call's timeouts; the matches it took stay
    with it until their deadline."""
    league = make_league("conductor_mute_referee", **FAST)
    group = players(6)
    group.register(lm_server, league.league_id)
    worker = referees()
    worker.register(league.league_id, capacity=1)
    mute = SilentAgent("mute").start()
    try:
        stopped = register_referee(
            lm_server,
            "stopped",
            referee_meta=referee_meta(mute.url, max_concurrent_matches=5),
            league_id=league.league_id,
        )
        # It answered at registration and stopped since (one that never answered is suspended
        # before the league starts).
        Referee.objects.filter(league=league, referee_id=stopped["referee_id"]).update(answered_at=timezone.now())
        close_window(league)
        conduct(league.league_id, cooldown_base=0.1)
    finally:
        mute.stop()
    league.refresh_from_db()
    assert league.status == League.Status.COMPLETED
    row = Referee.objects.get(league=league, referee_id=stopped["referee_id"])
    assert row.status == AgentStatus.SUSPENDED and row.unreachable_since is not None
    first = Event.objects.filter(league=league, agent=row.referee_id, kind__in=("referee_failed", "referee_suspended"))
    assert first.order_by("pk")[0].kind == "referee_suspended"  # at its first failure
    assert first.order_by("pk")[0].payload["failures"] < SUSPEND_AFTER
    sent = Event.objects.filter(league=league, direction="OUT", kind="START_MATCH", agent=row.referee_id)
    assert len({e.payload["message"]["round_id"] for e in sent}) == 1  # one round's batch, never again
    # It took the calls and may be playing them: they stayed with it until their deadline (given
    # to the other referee at once, their players could be told two outcomes).
    released = Event.objects.filter(league=league, kind="match_released", agent=row.referee_id)
    assert released.exists() and all("by the match deadline" in e.payload["reason"] for e in released)
    assert MatchResult.objects.filter(league=league).count() == 15


def test_it_does_not_start_a_league_below_the_minimum(lm_server, players):
    league = make_league("conductor_short", min_players=3, **FAST)
    group = players(2)
    group.register(lm_server, league.league_id)
    close_window(league)

    async def one_pass() -> None:
        await Conductor(league_id=league.league_id).run(once=True)

    asyncio.run(one_pass())
    asyncio.run(one_pass())

    league.refresh_from_db()
    assert league.status == League.Status.REGISTERING
    assert not Round.objects.filter(league=league).exists()
    assert Event.objects.filter(league=league, kind="start_refused").count() == 1


def test_it_counts_each_dispatch_once_per_match(lm_server, players, referees):
    league = make_league("conductor_once", **FAST)
    group = players(6)
    group.register(lm_server, league.league_id)
    ref = referees()
    ref.register(league.league_id, capacity=3)
    close_window(league)

    conduct(league.league_id)

    starts = Counter(match_id for match_id, _token in ref.starts)
    assert set(starts.values()) == {1}
    assert len(starts) == 15 == MatchResult.objects.filter(league=league).count()


def test_two_conductors_never_dispatch_the_same_match(lm_server, players, referees, agent_env, manage_py):
    """Two runleague processes on the same database: every match is claimed once, by one of them."""
    from tests.support.servers import Process

    league = make_league("conductor_pair", **FAST)
    group = players(8)
    group.register(lm_server, league.league_id)
    refs = [referees(), referees()]
    for ref in refs:
        ref.register(league.league_id, capacity=3)
    close_window(league)

    args = [*manage_py, "runleague", "--league", league.league_id, "--until-done", "--poll", "0.01"]
    workers = [Process(args, agent_env), Process(args, agent_env)]
    try:
        for worker in workers:
            worker.proc.wait(60)
    finally:
        for worker in workers:
            worker.kill()

    league.refresh_from_db()
    assert league.status == League.Status.COMPLETED
    assert [w.proc.returncode for w in workers] == [0, 0]
    # (match_id, match token of the attempt) → the referees it was sent to. A start the other
    # conductor finds unsettled past the call's whole retry budget is sent again to the same
    # referee (stale_assignments; start_match is idempotent), which a loaded machine can cause;
    # one attempt claimed by both conductors would go to two referees.
    sent_to: dict[tuple[str, str], set[int]] = {}
    for n, ref in enumerate(refs):
        for start in ref.starts:
            sent_to.setdefault(start, set()).add(n)
    assert all(len(targets) == 1 for targets in sent_to.values()), sent_to
    assert len({match_id for match_id, _ in sent_to}) == 28 == MatchResult.objects.filter(league=league).count()
    assert all(ref.max_running <= 3 for ref in refs)


def test_it_runs_matches_itself_in_embedded_mode_without_referees(lm_server, players):
    league = make_league("conductor_embedded", embedded_referee=True, **FAST)
    group = players(4)
    group.register(lm_server, league.league_id)
    close_window(league)

    conduct(league.league_id)

    league.refresh_from_db()
    assert league.status == League.Status.COMPLETED
    results = MatchResult.objects.filter(league=league)
    assert results.count() == 6
    assert all(r.referee is None and r.log for r in results)
    assert all(1 <= r.details["drawn_number"] <= 10 for r in results)
    for port in group.server.ports:
        kinds = Counter(m["message_type"] for m in group.games[port])
        assert kinds["GAME_INVITATION"] == kinds["CHOOSE_PARITY_CALL"] == kinds["GAME_OVER"] == 3


def boundary_order(league: League, player_id: str) -> list[tuple[str, int]]:
    """The player's round notifications as the Event log recorded them (row order)."""
    kinds = {"ROUND_ANNOUNCEMENT", "LEAGUE_STANDINGS_UPDATE", "ROUND_COMPLETED"}
    return [(d.kind, d.round_id) for d in delivery_log.sent(league, agent=player_id) if d.kind in kinds]


def expected_boundaries(rounds: int) -> list[tuple[str, int]]:
    order = []
    for r in range(1, rounds + 1):
        order += [("ROUND_ANNOUNCEMENT", r), ("LEAGUE_STANDINGS_UPDATE", r), ("ROUND_COMPLETED", r)]
    return order


@pytest.mark.parametrize("pause", [0.0, 0.3])
def test_each_player_sees_a_round_end_before_the_next_round(lm_server, players, referees, pause):
    """standings(r) < completed(r) < announcement(r+1), per player, in the Event log and as received.

    Without a round_pause the boundary is one delivery phase (the round completed and the next
    announced in one transaction, its first matches claimed in it too); with one, the phases stay
    apart by at least the pause."""
    league = make_league(f"conductor_boundary_{int(pause * 10)}", round_pause=pause, **FAST)
    group = players(4)
    ids = group.register(lm_server, league.league_id)
    referees().register(league.league_id, capacity=2)
    close_window(league)

    conduct(league.league_id)

    league.refresh_from_db()
    assert league.status == League.Status.COMPLETED
    rounds = list(Round.objects.filter(league=league).order_by("number"))
    assert len(rounds) == 3
    for port, player_id in ids.items():
        received = [(m["message_type"], m["round_id"]) for m in group.received[port][:-1]]
        assert received == expected_boundaries(3), player_id
        assert boundary_order(league, player_id) == expected_boundaries(3), player_id
    # Each round's completion is logged before the next round starts, and its matches are
    # assigned only once it has.
    state = list(
        Event.objects.filter(league=league, kind__in=["round_completed", "round_started", "match_assigned"])
        .order_by("id")
        .values_list("kind", "payload", "match_id")
    )
    marks = [(kind, payload["round_id"]) for kind, payload, _ in state if kind != "match_assigned"]
    assert marks == [("round_started", 1), ("round_completed", 1), ("round_started", 2), ("round_completed", 2),
                     ("round_started", 3), ("round_completed", 3)]  # fmt: skip
    for r in (1, 2, 3):
        started = state.index(next(s for s in state if s[0] == "round_started" and s[1]["round_id"] == r))
        assigned = [i for i, s in enumerate(state) if s[0] == "match_assigned" and s[2].startswith(f"R{r}M")]
        assert assigned and min(assigned) > started, r
    for previous, following in zip(rounds, rounds[1:], strict=False):
        gap = (following.announced_at - previous.completed_at).total_seconds()
        assert gap >= pause, (previous.number, gap)


def told(group: ScriptedPlayers, port: int, round_id: int) -> bool:
    """Whether the player on ``port`` has received the ROUND_ANNOUNCEMENT of ``round_id``."""
    return any(
        m["message_type"] == "ROUND_ANNOUNCEMENT" and m["round_id"] == round_id for m in list(group.received[port])
    )


def test_a_match_starts_only_once_both_its_players_are_told(lm_server, players, referees):
    """start_match reaches the referee only after both players have the round's announcement
    (and so, in their order, the last round's standings and ROUND_COMPLETED)."""
    league = make_league("conductor_told_first", **FAST)
    group = players(6)
    ports = {player_id: port for port, player_id in group.register(lm_server, league.league_id).items()}
    seen: list[tuple[str, bool, bool]] = []

    def check(start: dict) -> None:
        a, b = ports[start["player_A_id"]], ports[start["player_B_id"]]
        seen.append((start["match_id"], told(group, a, start["round_id"]), told(group, b, start["round_id"])))

    referees(on_start=check).register(league.league_id, capacity=3)
    close_window(league)

    conduct(league.league_id)

    league.refresh_from_db()
    assert league.status == League.Status.COMPLETED
    assert len(seen) == 15
    assert all(a and b for _, a, b in seen), [s for s in seen if not (s[1] and s[2])]
    assert not Round.objects.filter(league=league, notices_owed=True).exists()


class Stopped(Exception):
    """A conductor stopped in the middle of a round's boundary."""


def test_owed_notices_are_sent_again_before_the_round_goes_on(lm_server, players, referees):
    """A conductor stopped after completing round 1 and announcing round 2 in the database, but
    before telling anyone: the notices stay owed, and the next pass sends the whole boundary
    (standings, ROUND_COMPLETED, the announcement) before round 2's matches start."""
    league = make_league("conductor_owed", **FAST)
    group = players(4)
    ports = {player_id: port for port, player_id in group.register(lm_server, league.league_id).items()}
    unannounced: list[str] = []

    def check(start: dict) -> None:
        for player_id in (start["player_A_id"], start["player_B_id"]):
            if not told(group, ports[player_id], start["round_id"]):
                unannounced.append(start["match_id"])

    referees(on_start=check).register(league.league_id, capacity=2)
    close_window(league)
    stopped: list[int] = []
    owed_when_resent: list[tuple] = []

    class StoppedAtTheFirstBoundary(Sender):
        """Stops the conductor (as a killed process would) on its first round boundary."""

        async def send_in_order(self, league, batches, timeout):
            if len(batches) == 3 and not stopped:  # standings, ROUND_COMPLETED, announcement
                stopped.append(batches[2][0].message["round_id"])
                raise Stopped
            return await super().send_in_order(league, batches, timeout)

    class NotingOwedNotices(Conductor):
        """Notes what the database says when it sends a boundary again."""

        async def resend_boundary(self, league, rnd):
            def state() -> tuple:
                matches = Match.objects.filter(league_id=league.pk, round__number=2).values_list("status", flat=True)
                return rnd.number, Round.objects.get(pk=rnd.pk).notices_owed, sorted(matches)

            owed_when_resent.append(await sync_to_async(state)())
            await super().resend_boundary(league, rnd)

    conduct(league.league_id, kind=NotingOwedNotices, sender=StoppedAtTheFirstBoundary(Shared()))

    league.refresh_from_db()
    assert stopped == [2]
    # Found owed once: round 1's notices, round 2's matches claimed and not yet started.
    assert owed_when_resent == [(1, True, [Match.Status.ASSIGNED] * 2)]
    assert league.status == League.Status.COMPLETED
    assert MatchResult.objects.filter(league=league).count() == 6
    assert not unannounced
    assert not Round.objects.filter(league=league, notices_owed=True).exists()
    for port in ports.values():
        assert group.types(port) == ["ROUND_ANNOUNCEMENT", "LEAGUE_STANDINGS_UPDATE", "ROUND_COMPLETED"] * 3 + [
            "LEAGUE_COMPLETED"
        ]
    assert len(list(delivery_log.sent(league, kind="ROUND_COMPLETED"))) == 3 * 4


def test_a_suspended_referee_is_probed_and_let_back_in_when_it_answers(lm_server, players, referees):
    """Suspended because nothing listened at its endpoint, it is pinged with backoff; once a
    referee answers there again it is ACTIVE and plays, with no admin's help."""
    from leagueproto.asgi import make_asgi_app
    from leagueproto.serve import ThreadedServer
    from leagueproto.server import McpServer

    league = make_league("conductor_probe", **FAST, round_pause=1.5)  # five rounds: time to come back
    group = players(6)
    group.register(lm_server, league.league_id)
    worker = referees()
    worker.register(league.league_id, capacity=1)
    port = free_port()
    gone = register_referee(
        lm_server,
        "gone",
        referee_meta=referee_meta(f"http://127.0.0.1:{port}/mcp", max_concurrent_matches=5),
        league_id=league.league_id,
    )
    # It answered once (else it would be suspended before the league starts, never answered).
    Referee.objects.filter(league=league, referee_id=gone["referee_id"]).update(answered_at=timezone.now())
    close_window(league)
    back = ScriptedReferee(lm_server)
    back.server = ThreadedServer(make_asgi_app(McpServer(back.toolset)), ports=(port,))  # its old endpoint
    back.registration = gone  # reports as the referee registered there

    def status() -> str:
        return Referee.objects.get(league=league, referee_id=gone["referee_id"]).status

    async def main() -> None:
        conductor = Conductor(league_id=league.league_id, poll=0.02, cooldown_base=0.1)
        run = asyncio.create_task(conductor.run(until_done=True))
        async with asyncio.timeout(30):
            while await sync_to_async(status)() != AgentStatus.SUSPENDED:
                await asyncio.sleep(0.02)
        back.start()
        await asyncio.wait_for(run, 60)

    try:
        asyncio.run(main())
    finally:
        back.stop()
    league.refresh_from_db()
    assert league.status == League.Status.COMPLETED
    kinds = list(
        Event.objects.filter(league=league, agent=gone["referee_id"], kind__startswith="referee_").values_list(
            "kind", flat=True
        )
    )
    assert kinds.index("referee_suspended") < kinds.index("referee_restored"), kinds
    assert MatchResult.objects.filter(league=league, referee__referee_id=gone["referee_id"]).exists()
    assert MatchResult.objects.filter(league=league).count() == 15
