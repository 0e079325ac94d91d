"""Ports for a bench's agents: never the same port twice in one process."""

from __future__ import annotations

import socket

import pytest
from django.core.management.base import CommandError

from league.bench import processes


class ReusingKernel:
    """A socket module whose bind to port 0 always gets the same port, as a kernel may."""

    def __init__(self, port: int) -> None:
        self.port = port

    def socket(self) -> ReusingSocket:
        return ReusingSocket(self.port)


class ReusingSocket:
    def __init__(self, port: int) -> None:
        self.port = port
        self.bound = 0

    def __enter__(self) -> ReusingSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def bind(self, address: tuple[str, int]) -> None:
        self.bound = address[1] or self.port

    def getsockname(self) -> tuple[str, int]:
        return ("127.0.0.1", self.bound)


@pytest.fixture
def reusing_kernel(monkeypatch):
    monkeypatch.setattr(processes, "_HANDED_OUT", set())
    monkeypatch.setattr(processes, "socket", ReusingKernel(41000))


def test_a_port_offered_again_by_the_kernel_is_not_handed_out_twice(reusing_kernel):
    assert processes.free_port() == 41000
    with pytest.raises(CommandError, match="no free port"):
        processes.free_port()


def test_a_run_of_ports_does_not_overlap_a_port_already_handed_out(reusing_kernel):
    assert processes.free_port() == 41000
    # Every candidate run starts at 41000, which is taken: no run is returned.
    with pytest.raises(CommandError, match="no run of 3 free ports"):
        processes.free_port_run(3)


def test_runs_and_ports_from_the_real_kernel_are_distinct_and_bindable():
    handed = [processes.free_port() for _ in range(5)]
    for _ in range(5):
        base = processes.free_port_run(20)
        handed.extend(range(base, base + 20))
    assert len(handed) == len(set(handed))
    for port in handed[:5]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_busy_share_is_the_busy_part_of_all_cores_time_between_readings():
    assert processes.busy_share((10.0, 100.0), (25.0, 120.0)) == 0.75
    assert processes.busy_share((10.0, 100.0), (10.0, 100.0)) == 0.0
    busy, total = processes.machine_cpu_times()
    assert 0 < busy < total
