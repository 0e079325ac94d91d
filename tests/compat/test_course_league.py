"""Course-style players as real processes play a whole league with us (docs/protocol.md, "Who an
agent is"): fixed ids P01…P04 in their senders, arriving in any order; a classmate who printed the
same id; one that accepts only ``league_manager:<id>`` as our sender; one whose registration reply
is lost on the way back (a TCP proxy drops it) and that sends the same registration again. None
loses a match for a reason of ours."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import sys
import threading
from pathlib import Path

from league import actions, senders
from league.models import League, MatchResult, Player
from tests.integration.test_recovery import FAST
from tests.support.servers import Process, free_ports, wait_for_port
from tests.support.waiting import wait_until

COURSE_PLAYER = Path(__file__).resolve().parent / "course_player.py"


class ReplyDropper:
    """A TCP proxy to ``target`` that forwards each request and drops the first ``drop`` replies
    (the connection is reset instead): what a lost registration reply looks like to an agent."""

    def __init__(self, target_port: int, port: int, drop: int) -> None:
        self.target_port, self.port, self.drop, self.dropped = target_port, port, drop, 0
        self.lost: list[bytes] = []  # the replies dropped
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, daemon=True).start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, replies: bool) -> None:
            with contextlib.suppress(OSError):
                if replies and self.dropped < self.drop:
                    self.dropped += 1  # the LM does the work; the agent never hears of it
                    self.lost.append(await src.read())  # the whole reply (the LM closes after it)
                    data = b""
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            writer.transport.abort()
            up_writer.transport.abort()

        await asyncio.gather(pipe(reader, up_writer, False), pipe(up_reader, writer, True))

    async def _close(self) -> None:
        self._server.close()
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)


def _log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_course_players_with_fixed_ids_a_strict_sender_and_a_lost_reply_play_a_whole_league(
    agent_env, manage_py, tmp_path
):
    league = actions.open_registration(actions.create_league(name="Course", league_id="course_league", **FAST), 120)
    procs: list[Process] = []

    def spawn(name: str, args: list[str]) -> Process:
        proc = Process(args, agent_env, str(tmp_path / f"{name}.log"))
        procs.append(proc)
        return proc

    lm_port = free_ports(2)
    lm_url = f"http://127.0.0.1:{lm_port}/mcp"
    proxy_port = lm_port + 1
    dropper = ReplyDropper(lm_port, proxy_port, drop=1)
    try:
        spawn("lm", [sys.executable, "-m", "uvicorn", "leaguesite.asgi:application", "--port", str(lm_port)])
        wait_for_port(lm_port)
        # Each player's fixed id, its flags, and the id it must end up with. "P02" twice: a
        # classmate printed the same id; whoever comes second gets the next free one.
        players = [("P01", []), ("P02", []), ("P03", ["--strict-sender"]), ("P04", ["lost"]), ("P02", [])]
        random.Random().shuffle(players)
        first_port = free_ports(len(players))
        ports = [first_port + n for n in range(len(players))]
        for n, (fixed_id, flags) in enumerate(players):
            lm = f"http://127.0.0.1:{proxy_port}/mcp" if "lost" in flags else lm_url
            args = [sys.executable, str(COURSE_PLAYER), "--port", str(ports[n]), "--lm", lm, "--id", fixed_id]
            args += ["--log", str(tmp_path / f"player{n}.jsonl"), *[f for f in flags if f.startswith("--")]]
            spawn(f"player{n}", args)
            # One at a time: who arrives first decides who gets a printed id twice over.
            wait_until(lambda n=n: league.players.count() >= n + 1, 60, f"player {fixed_id} registered", 0.05)
        ref_port = free_ports(1)
        common = ["--league-url", lm_url, "--league-id", league.league_id]
        spawn("ref", [*manage_py, "runreferee", "--port", str(ref_port), *common])
        wait_until(lambda: league.referees.count() >= 1, 60, "the referee registered", 0.1)
        actions.start_league(league)
        spawn("conductor", [*manage_py, "runleague", "--league", league.league_id, "--poll", "0.05"])
        wait_until(
            lambda: League.objects.get(pk=league.pk).status == League.Status.COMPLETED, 180, "the league completed", 0.2
        )
    finally:
        dropper.close()
        for proc in reversed(procs):
            proc.terminate(5)

    # Ids: asked for and free → given; the second P02 → the next free one; one seat each.
    by_port = {int(p.endpoint.rsplit(":", 1)[1].split("/")[0]): p for p in Player.objects.filter(league=league)}
    assert len(by_port) == 5
    given = [by_port[ports[n]].player_id for n in range(5)]
    expected: list[str] = []  # the rule: the id asked for when free, else the one after the highest
    for fixed_id, _ in players:
        free = fixed_id not in expected
        expected.append(fixed_id if free else f"P{max(int(e[1:]) for e in expected) + 1:02d}")
    assert given == expected, players
    # The lost reply: the LM registered it, the agent sent the same message again and got the same id.
    assert dropper.dropped == 1 and b"LEAGUE_REGISTER_RESPONSE" in dropper.lost[0]
    lost = next(n for n, (_, flags) in enumerate(players) if "lost" in flags)
    registrations = [e["registration"] for e in _log(tmp_path / f"player{lost}.jsonl") if "registration" in e]
    assert registrations[0] == "no reply" and registrations[-1]["player_id"] == expected[lost]
    # No technical loss anywhere: every match played on its merits.
    results = MatchResult.objects.filter(league=league)
    assert results.count() == 10
    assert not results.filter(technical_loss_a=True).exists() and not results.filter(technical_loss_b=True).exists()
    # The strict agent refused our bare sender once, and was sent league_manager:LM01 from then on.
    strict = next(n for n, (_, flags) in enumerate(players) if "--strict-sender" in flags)
    assert by_port[ports[strict]].lm_sender == senders.ALTERNATE
    received = _log(tmp_path / f"player{strict}.jsonl")
    lm_calls = [e for e in received if str(e.get("params", {}).get("sender", "")).startswith("league_manager")]
    bare = [e for e in lm_calls if e["params"]["sender"] == senders.DEFAULT]
    assert len(bare) == 1 and lm_calls[-1]["params"]["sender"] == senders.ALTERNATE
    assert lm_calls[-1]["method"] == "notify_league_completed"
    # Every player heard the league end.
    for n in range(5):
        assert any(e.get("method") == "notify_league_completed" for e in _log(tmp_path / f"player{n}.jsonl")), n


def test_a_referee_whose_registration_reply_is_lost_keeps_its_id_and_its_reports_count(agent_env, manage_py, tmp_path):
    league = actions.open_registration(actions.create_league(name="Lost", league_id="lost_reply", **FAST), 120)
    procs: list[Process] = []

    def spawn(name: str, args: list[str]) -> Process:
        proc = Process(args, agent_env, str(tmp_path / f"{name}.log"))
        procs.append(proc)
        return proc

    lm_port = free_ports(2)
    lm_url = f"http://127.0.0.1:{lm_port}/mcp"
    dropper = ReplyDropper(lm_port, lm_port + 1, drop=1)
    try:
        spawn("lm", [sys.executable, "-m", "uvicorn", "leaguesite.asgi:application", "--port", str(lm_port)])
        wait_for_port(lm_port)
        via_proxy = ["--league-url", f"http://127.0.0.1:{lm_port + 1}/mcp", "--league-id", league.league_id]
        spawn("ref", [*manage_py, "runreferee", "--port", str(free_ports(1)), *via_proxy])
        common = ["--league-url", lm_url, "--league-id", league.league_id]
        spawn("players", [*manage_py, "runplayer", "--port", str(free_ports(3)), "--count", "3", *common])
        wait_until(
            lambda: league.players.count() >= 3 and dropper.dropped >= 1 and league.referees.exists(),
            120,
            "agents registered, one reply dropped",
            0.1,
        )
        actions.start_league(league)
        spawn("conductor", [*manage_py, "runleague", "--league", league.league_id, "--poll", "0.05"])
        wait_until(
            lambda: League.objects.get(pk=league.pk).status == League.Status.COMPLETED, 180, "the league completed", 0.2
        )
    finally:
        dropper.close()
        for proc in reversed(procs):
            proc.terminate(5)
    assert b"REFEREE_REGISTER_RESPONSE" in dropper.lost[0] and b"REF01" in dropper.lost[0]
    (referee,) = league.referees.all()
    assert referee.referee_id == "REF01"
    results = MatchResult.objects.filter(league=league)
    assert results.count() == 3 and set(results.values_list("referee__referee_id", flat=True)) == {"REF01"}
