"""The test network (tests/support/netns.py) behaves like separate machines: hosts reach each other
and the root namespace by address, and a host that blocks inbound connections still connects out."""

from __future__ import annotations

import sys
import time

import pytest

from tests.support import netns

WHY_NOT = netns.unsupported()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=str(WHY_NOT))

CONNECT = (
    "import socket, sys\ns = socket.socket(); s.settimeout(2)\n"
    "sys.exit(s.connect_ex((sys.argv[1], int(sys.argv[2]))))\n"
)
SERVE = "import socket, sys, time\ns = socket.create_server((sys.argv[1], int(sys.argv[2])))\ntime.sleep(60)\n"


def _server(address: str, port: int) -> list[str]:
    return [sys.executable, "-c", SERVE, address, str(port)]


def _connects(host: netns.Host, address: str, port: int) -> bool:
    done = host.run(sys.executable, "-c", CONNECT, address, str(port), check=False)
    return done.returncode == 0


def _eventually_connects(host: netns.Host, address: str, port: int) -> bool:
    """Whether ``host`` connects within a few seconds (the server may still be starting)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if _connects(host, address, port):
            return True
        time.sleep(0.1)
    return False


def test_hosts_reach_each_other_and_the_root_namespace_by_address() -> None:
    with netns.Network() as network:
        a, b = network.add_host("a"), network.add_host("b")
        a.popen(_server(a.address, 9100), env={})
        network.popen(_server(network.address, 9101), env={})
        assert _eventually_connects(b, a.address, 9100)
        assert _eventually_connects(a, network.address, 9101)


def test_a_host_that_blocks_inbound_connects_out_but_cannot_be_reached() -> None:
    with netns.Network() as network:
        a, b = network.add_host("a"), network.add_host("b")
        try:
            a.block_inbound()
        except netns.Unsupported as exc:
            pytest.skip(str(exc))
        a.popen(_server(a.address, 9200), env={})
        b.popen(_server(b.address, 9201), env={})
        assert _eventually_connects(a, a.address, 9200)  # listening: its own host reaches it
        assert _eventually_connects(a, b.address, 9201)  # and it connects out
        assert not _connects(b, a.address, 9200)  # but no one connects in
