"""The endpoint policy shared by the League Manager and the referees (leagueproto/endpoint_policy.py):
pure rules on an address and a port, and the connection-time check built from them."""

from __future__ import annotations

import asyncio
import ipaddress

import pytest

from leagueproto.endpoint_policy import (
    DEFAULT_ALLOWED_NETWORKS,
    AddressPolicy,
    address_problem,
    ip_of,
    legacy_ipv4,
    network_names,
    networks,
    port_problem,
)


def check(policy: AddressPolicy, host: str, port: int, address: str) -> str | None:
    return asyncio.run(policy(host, port, address))


def test_networks_read_a_league_text_or_a_start_match_list_and_skip_what_does_not_parse():
    assert networks("10.0.0.0/8, ::1/128,,nonsense") == networks(["10.0.0.0/8", "::1/128", "nonsense", 7])
    assert [str(n) for n in networks("10.1.2.3/8")] == ["10.0.0.0/8"]
    assert len(networks(DEFAULT_ALLOWED_NETWORKS)) == 5


def test_a_leagues_networks_go_to_a_referee_as_the_texts_it_reads_back():
    names = network_names("10.1.2.3/8, fd00::1/8 ,nonsense")
    assert names == ("10.0.0.0/8", "fd00::/8")
    assert networks(list(names)) == networks("10.1.2.3/8, fd00::1/8 ,nonsense")


def test_addresses_are_read_in_every_spelling_a_connection_would_use():
    assert ip_of("::ffff:169.254.169.254") == ipaddress.ip_address("169.254.169.254")
    assert ip_of("2130706433") == ipaddress.ip_address("127.0.0.1")
    assert legacy_ipv4("0x7f.1") == ipaddress.ip_address("127.0.0.1")
    assert ip_of("player.example") is None


@pytest.mark.parametrize("address", ["169.254.169.254", "169.254.1.1", "fe80::1", "fd00:ec2::254", "100.100.100.200"])
def test_link_local_and_metadata_addresses_are_refused_even_inside_the_networks(address):
    everything = networks("0.0.0.0/0,::/0")
    assert "link-local or a metadata service" in address_problem(ipaddress.ip_address(address), everything)


def test_an_address_outside_the_networks_is_refused():
    allowed = networks("10.0.0.0/8")
    assert address_problem(ipaddress.ip_address("10.9.8.7"), allowed) is None
    assert "outside the league's allowed networks" in address_problem(ipaddress.ip_address("127.0.0.1"), allowed)
    assert "outside" in address_problem(ipaddress.ip_address("::1"), allowed)


def test_service_ports_are_refused_unless_allowed():
    assert "Redis" in port_problem(6379)
    assert port_problem(6379, allow_service_ports=True) is None
    assert port_problem(8101) is None


def test_the_connection_check_applies_every_rule_to_the_address_connected_to():
    policy = AddressPolicy(networks("10.0.0.0/8"), own_port=8001)
    assert check(policy, "p.lan", 8101, "10.1.1.1") is None
    assert "outside" in check(policy, "p.lan", 8101, "192.168.1.1")  # what the name resolves to now
    assert "Redis" in check(policy, "p.lan", 6379, "10.1.1.1")
    assert "not an IP address" in check(policy, "p.lan", 8101, "p.lan")
    policy.allowed = networks("127.0.0.0/8")  # the networks may change while the client is in use
    assert "own address" in check(policy, "127.0.0.1", 8001, "127.0.0.1")
    assert check(policy, "127.0.0.1", 8002, "127.0.0.1") is None
    policy.allow_service_ports = True
    assert check(policy, "127.0.0.1", 6379, "127.0.0.1") is None


def test_a_pass_skips_the_network_rule_but_never_the_metadata_rule():
    policy = AddressPolicy(networks("10.0.0.0/8"), passes=[("LM.example", 8000)])
    assert check(policy, "lm.example", 8000, "203.0.113.5") is None
    assert "outside" in check(policy, "lm.example", 8001, "203.0.113.5")
    assert "metadata" in check(policy, "lm.example", 8000, "169.254.169.254")


def test_a_kept_verdict_follows_every_change_of_the_rules():
    """The policy keeps its verdict per (host, port, address); changing any of its rules makes it
    judge the same connection afresh."""
    policy = AddressPolicy(networks("10.0.0.0/8"))
    assert "outside" in check(policy, "p.lan", 8101, "192.168.1.1")
    policy.allowed = networks("192.168.0.0/16")
    assert check(policy, "p.lan", 8101, "192.168.1.1") is None
    assert "Redis" in check(policy, "p.lan", 6379, "192.168.1.1")
    policy.allow_service_ports = True
    assert check(policy, "p.lan", 6379, "192.168.1.1") is None
    policy.own_port = 8101
    assert check(policy, "127.0.0.1", 8101, "127.0.0.1") is not None
    policy.passes = {("lm.example", 8000)}
    assert "outside" in check(policy, "lm.example", 8001, "203.0.113.5")
    policy.allowed = networks("203.0.113.0/24")
    assert check(policy, "lm.example", 8001, "203.0.113.5") is None
