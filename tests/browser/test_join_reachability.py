"""The join panel shows each agent's real reachability while the league registers, checked in
Chromium with the real conductor (``runleague``) pinging a real player server and a seat
registered where nothing listens: "Answering" and "Not answering" appear as the pings happen."""

from __future__ import annotations

import pytest

from league import actions
from league.models import League
from tests.league.conductor_support import ScriptedPlayers
from tests.support.servers import Process, free_port

pytestmark = [
    pytest.mark.browser,
    pytest.mark.processes,
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume"),
]


def agent_text(page, name: str) -> str:
    return page.locator("#join-agents li", has_text=name).inner_text()


def test_the_join_panel_shows_who_answers_the_leagues_ping(site, page, agent_env, manage_py, tmp_path):
    league = actions.open_registration(actions.create_league(name="Class", league_id="class_ping"), 600)
    live = ScriptedPlayers(1)
    live.start()
    conductor = None
    try:
        reg = actions.register_player(
            league.league_id, {"display_name": "Live", "contact_endpoint": live.server.urls()[0]}, None
        )
        dead = f"http://127.0.0.1:{free_port()}/mcp"
        pasted = actions.register_player(league.league_id, {"display_name": "Pasted", "contact_endpoint": dead}, None)
        assert reg.status == pasted.status == "ACCEPTED"
        page.goto(f"{site.base}/leagues/class_ping/")
        page.wait_for_selector("#join-agents li")
        assert "Not called by the league yet" in agent_text(page, "Pasted")

        args = [*manage_py, "runleague", "--league", league.league_id, "--poll", "0.1"]
        conductor = Process(args, agent_env, str(tmp_path / "conductor.log"))
        page.wait_for_function(
            "() => /Answering/.test([...document.querySelectorAll('#join-agents li')]"
            ".find(li => li.textContent.includes('Live')).textContent)",
            timeout=60_000,
        )
        page.wait_for_function(
            "() => /Not answering/.test([...document.querySelectorAll('#join-agents li')]"
            ".find(li => li.textContent.includes('Pasted')).textContent)",
            timeout=60_000,
        )
        assert page.locator("#join-agents li", has_text="Live").get_attribute("class") == "agent agent-ok"
        assert page.locator("#join-agents li", has_text="Pasted").get_attribute("class") == "agent agent-silent"
        assert "plays no match unless it answers" in agent_text(page, "Pasted")
        assert League.objects.get(pk=league.pk).status == League.Status.REGISTERING
    finally:
        if conductor is not None:
            conductor.kill()
        live.stop()
