"""Who an agent is (docs/protocol.md, "Who an agent is"): its registered endpoint plus the token
we issued. The same agent registering again (its reply lost, a restart, a rotation whose reply
was lost) gets its identity back in any league state; someone who merely knows the endpoint
does not; an id asked for in the sender is given when free."""

from __future__ import annotations

import pytest

from league import actions
from league.auth import authenticate
from league.mcp.messages import RegisterPlayerRequest, RegisterRefereeRequest
from league.mcp.registrations import registration_request
from league.models import Event, League, Player, Referee, hash_token
from leagueproto.errors import LeagueError
from tests.league.lm_support import make_league, message, player_meta, referee_meta

pytestmark = pytest.mark.django_db

HERE = "127.0.0.1"  # a registration from the machine the endpoint is on
ELSEWHERE = "10.20.30.40"  # a classmate's machine


def _meta(port: int, name: str = "Agent Alpha") -> dict:
    return player_meta(f"http://127.0.0.1:{port}/mcp", display_name=name)


def test_an_id_asked_for_is_given_when_free_and_the_next_free_one_otherwise():
    make_league()
    asked = [("P03", 21001), ("P01", 21002), ("P03", 21003), ("alpha", 21004), ("P1", 21005)]
    got = [actions.register_player(None, _meta(port), None, sender_id=sid).agent_id for sid, port in asked]
    assert got == ["P03", "P01", "P04", "P05", "P06"]
    assert Player.objects.get(player_id="P04").self_named == "P03"  # shown on its page
    assert Event.objects.filter(kind="player_registered", agent="P04", payload__asked_for="P03").exists()


def test_a_lost_reply_then_a_restart_in_a_running_league_keeps_the_identity():
    league = make_league()
    first = actions.register_player(None, _meta(21010), None, client_host=HERE)
    League.objects.filter(pk=league.pk).update(status=League.Status.RUNNING)
    again = actions.register_player(None, _meta(21010), None, client_host=HERE)
    assert (again.status, again.agent_id, again.reason) == ("ACCEPTED", first.agent_id, None)
    assert again.auth_token and again.league_manager_token
    # A new player is refused (the league runs); the one already in it is not.
    late = actions.register_player("test_league", _meta(21011), None, client_host=HERE)
    assert (late.status, late.reason) == ("REJECTED", "Registration closed")


def test_the_token_before_a_rotation_whose_reply_was_lost_still_registers_again():
    make_league()
    first = actions.register_player(None, _meta(21020), None)
    rotated = actions.register_player(None, _meta(21020), first.auth_token)  # this reply is lost
    assert rotated.status == "ACCEPTED"
    again = actions.register_player(None, _meta(21020), first.auth_token)  # the agent still holds the first
    assert (again.status, again.agent_id) == ("ACCEPTED", first.agent_id)
    player = Player.objects.get()
    assert player.token_hash == hash_token(again.auth_token)
    assert player.previous_token_hash == hash_token(first.auth_token)
    # Once the new token is used, the old one retires: it registers nothing any more.
    query = message("LEAGUE_QUERY", "player:P01", auth_token=again.auth_token, query_type="GET_STANDINGS")
    assert authenticate("agent", query, None).agent_id == "P01"
    assert Player.objects.get().previous_token_hash == ""
    with pytest.raises(LeagueError, match="E012"):
        actions.register_player(None, _meta(21020), first.auth_token)


def test_the_previous_token_is_good_only_for_registering_again():
    make_league()
    first = actions.register_player(None, _meta(21030), None)
    actions.register_player(None, _meta(21030), first.auth_token)
    query = message("LEAGUE_QUERY", "player:P01", auth_token=first.auth_token, query_type="GET_STANDINGS")
    with pytest.raises(LeagueError, match="E012"):
        authenticate("agent", query, None)


def test_a_classmate_who_knows_the_endpoint_gets_no_token_and_is_told_what_to_do():
    make_league()
    first = actions.register_player(None, _meta(21040), None, client_host=HERE)
    thief = actions.register_player(None, _meta(21040, "Thief"), None, client_host=ELSEWHERE)
    assert (thief.status, thief.agent_id, thief.auth_token) == ("REJECTED", "P01", None)
    assert "register again with its auth_token" in thief.reason
    assert "from the machine the endpoint is on" in thief.reason
    player = Player.objects.get()
    assert player.token_hash == hash_token(first.auth_token) and player.display_name == "Agent Alpha"


def test_a_referee_whose_reply_was_lost_keeps_its_id(referee_key):
    make_league()
    meta = referee_meta("http://127.0.0.1:21050/mcp")
    first = actions.register_referee(None, meta, None, referee_key=referee_key, client_host=HERE)
    again = actions.register_referee(None, meta, None, referee_key=referee_key, client_host=HERE)
    assert (again.status, again.agent_id) == ("ACCEPTED", first.agent_id) == ("ACCEPTED", "REF01")
    assert Referee.objects.count() == 1
    other = actions.register_referee(None, meta, None, referee_key=referee_key, client_host=ELSEWHERE)
    assert (other.status, other.agent_id, other.auth_token) == ("REJECTED", "REF01", None)


def test_an_agent_marked_unreachable_is_back_in_play_when_it_registers_again():
    make_league()
    actions.register_player(None, _meta(21060), None, client_host=HERE)
    Player.objects.update(unreachable_reason="silent", failures=3, unreachable_since="2025-01-01T00:00:00Z")
    assert actions.register_player(None, _meta(21060), None, client_host=HERE).status == "ACCEPTED"
    player = Player.objects.get()
    assert (player.unreachable_since, player.failures) == (None, 0)


def test_the_players_page_shows_the_id_it_calls_itself_and_the_sender_it_takes(client):
    make_league()
    actions.register_player(None, _meta(21070), None, sender_id="P02")
    actions.register_player(None, _meta(21071), None, sender_id="P02")
    Player.objects.filter(player_id="P03").update(lm_sender="league_manager:LM01")
    page = client.get("/leagues/test_league/players/P03/").content.decode()
    assert 'id="identity-note"' in page
    assert "Calls itself <strong>P02</strong>" in page and "its id in this league is P03" in page
    assert "<code>league_manager:LM01</code>" in page
    assert 'id="identity-note"' not in client.get("/leagues/test_league/players/P02/").content.decode()


@pytest.mark.parametrize(
    ("tool", "meta_key", "message_type"),
    [
        ("register_player", "player_meta", "CHOOSE_PARITY_CALL"),
        ("register_referee", "referee_meta", "LEAGUE_REGISTER_REQUEST"),
        ("register_player", "player_meta", "REFEREE_REGISTER_REQUEST"),
    ],
)
def test_a_registration_tool_takes_only_its_own_message_type(tool, meta_key, message_type, referee_key):
    make_league()
    kind = "player" if tool == "register_player" else "referee"
    meta = _meta(21080) if kind == "player" else referee_meta("http://127.0.0.1:21081/mcp")
    fields = {meta_key: meta, "referee_key": referee_key} if kind == "referee" else {meta_key: meta}
    model = RegisterPlayerRequest if kind == "player" else RegisterRefereeRequest
    msg = model.model_validate(message(message_type, f"{kind}:x", **fields))
    with pytest.raises(LeagueError) as caught:
        registration_request(tool, msg, None)
    assert caught.value.code.value == "E002" and caught.value.context["field"] == "message_type"
    assert not Player.objects.exists() and not Referee.objects.exists()
