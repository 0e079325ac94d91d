"""What a process knows of the relay sockets: its own, and others' as read from the database."""

from __future__ import annotations

from league.relay import hub


def test_a_socket_read_elsewhere_is_trusted_until_its_time():
    hub.remember_remote("hub_league", "P01", "specific.x!1", until=100.0)
    assert hub.remote_channel("hub_league", "P01", now=99.0) == "specific.x!1"
    assert hub.remote_channel("hub_league", "P01", now=100.0) == ""
    hub.forget_remote("hub_league", "P01")


def test_a_socket_seen_opening_or_closing_here_replaces_what_was_read_elsewhere():
    """The player's socket closed here (or opened here): a channel read of the database before
    may be that socket's, and a call sent there would wait for a reply to its deadline."""
    hub.remember_remote("hub_league", "P02", "specific.x!2", until=1e12)
    hub.detach("hub_league", "P02", "specific.here!1")
    assert hub.remote_channel("hub_league", "P02", now=0.0) == ""
    hub.remember_remote("hub_league", "P02", "specific.x!2", until=1e12)
    hub.attach("hub_league", "P02", "specific.here!2", consumer=object())
    assert hub.remote_channel("hub_league", "P02", now=0.0) == ""
    assert hub.local_channel("hub_league", "P02") == "specific.here!2"
    hub.detach("hub_league", "P02", "specific.here!2")
    assert hub.local_channel("hub_league", "P02") is None


def test_a_socket_that_closed_here_is_known_closed_until_many_more_have(monkeypatch):
    """The database may still name a socket this process has seen close (its closing is recorded
    after): the relay endpoint does not send a call to that channel (league/relay/endpoint.py)."""
    monkeypatch.setattr(hub, "CLOSED_KEPT", 3)
    monkeypatch.setattr(hub, "_closed", {})  # (this process's other tests closed sockets too)
    hub.attach("hub_league", "P03", "specific.here!3", consumer=object())
    assert not hub.closed_here("specific.here!3")
    hub.detach("hub_league", "P03", "specific.here!3")
    assert hub.closed_here("specific.here!3")
    for n in range(3):
        hub.detach("hub_league", "P04", f"specific.other!{n}")
    assert not hub.closed_here("specific.here!3")  # the oldest forgotten past CLOSED_KEPT
    assert hub.closed_here("specific.other!2")


def test_what_is_heard_of_a_socket_of_this_process_changes_nothing():
    """This process's own words come back to it (its replies channel is in the group), and may
    come late: a socket of its own, open or closed here, is never taken as another process's."""
    hub.attach("hub_league", "P05", "specific.here!5", consumer=object())
    hub.heard("hub_league", "P05", "specific.here!5", opened=True, until=1e12)
    hub.detach("hub_league", "P05", "specific.here!5")
    hub.heard("hub_league", "P05", "specific.here!5", opened=True, until=1e12)  # the opening, late
    assert hub.remote_channel("hub_league", "P05", now=0.0) == ""
    hub.heard("hub_league", "P05", "specific.there!6", opened=True, until=1e12)
    assert hub.remote_channel("hub_league", "P05", now=0.0) == "specific.there!6"
    hub.heard("hub_league", "P05", "specific.there!6", opened=False, until=1e12)
    assert hub.remote_channel("hub_league", "P05", now=0.0) == ""
