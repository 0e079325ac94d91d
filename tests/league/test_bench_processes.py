"""Ports for a bench's agents: never the same port twice in one process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest
from django.core.management.base import CommandError

from league.bench import processes


class SameChoice:
    """A random source that always picks the same port, as a run of bad luck would."""

    def __init__(self, port: int) -> None:
        self.port = port

    def randint(self, first: int, last: int) -> int:
        assert first <= self.port <= last
        return self.port


@pytest.fixture
def unlucky() -> processes.Ports:
    return processes.Ports(rng=SameChoice(21000))


def test_a_port_chosen_again_is_not_handed_out_twice(unlucky):
    assert unlucky.free_port() == 21000
    with pytest.raises(CommandError, match="no free port"):
        unlucky.free_port()


def test_a_run_of_ports_does_not_overlap_a_port_already_handed_out(unlucky):
    assert unlucky.free_port() == 21000
    # Every candidate run starts at 21000, which is taken: no run is returned.
    with pytest.raises(CommandError, match="no run of 3 free ports"):
        unlucky.free_port_run(3)


def test_a_port_in_use_is_not_handed_out(unlucky):
    with socket.socket() as busy:
        try:
            busy.bind(("127.0.0.1", 21001))
            busy.listen()
        except OSError:
            pass  # another process of the machine holds it: in use all the same
        with pytest.raises(CommandError, match="no run of 3 free ports"):
            unlucky.free_port_run(3)  # 21000-21002 holds a port in use


def test_a_run_holding_a_service_port_is_not_handed_out(monkeypatch):
    """The LM refuses an agent's endpoint on a service's well-known port (11211, Memcached): a
    run of ports covering one would leave a player unregistered and the bench waiting."""
    ports = processes.Ports(rng=SameChoice(11200))
    # Every port free but the service's (another worker's agents may hold some of these now).
    monkeypatch.setattr(ports, "_bindable", lambda port: port not in ports.handed_out)
    with pytest.raises(CommandError, match="no run of 100 free ports"):
        ports.free_port_run(100)  # 11200-11299 holds 11211
    assert ports.free_port_run(5) == 11200  # 11200-11204 holds none


def test_runs_and_ports_are_distinct_bindable_and_outside_the_kernels_ephemeral_range():
    low, high = processes.ephemeral_range()
    ports = processes.Ports()
    handed = [ports.free_port() for _ in range(5)]
    for _ in range(5):
        base = ports.free_port_run(100)
        handed.extend(range(base, base + 100))
    assert len(handed) == len(set(handed))
    # The kernel gives ports in its ephemeral range to outgoing connections: an agent's port
    # there could be taken between being chosen and being bound.
    assert not [port for port in handed if low <= port <= high]
    for port in handed[:5]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_processes_with_parts_of_their_own_choose_ports_apart():
    runs = []
    for index in range(4):
        first, last = processes.Ports(share=(index, 4), ephemeral=(32_768, 60_999)).first_ports(10)
        runs.append((first, last + 10 - 1))  # the ports the runs may hold
    for (_, end), (start, _) in zip(runs, runs[1:], strict=False):
        assert end < start
    assert runs[0][0] == 10_000 and runs[-1][1] <= 32_767


def test_with_no_room_below_the_ephemeral_range_ports_come_from_above_it():
    base = processes.Ports(ephemeral=(10_050, 60_999)).free_port_run(100)
    assert 61_000 <= base <= 65_436


def test_this_process_hands_out_each_port_once():
    first = processes.free_port()
    assert first in processes.PORTS.handed_out and processes.free_port() != first


def test_busy_share_is_the_busy_part_of_all_cores_time_between_readings():
    assert processes.busy_share((10.0, 100.0), (25.0, 120.0)) == 0.75
    assert processes.busy_share((10.0, 100.0), (10.0, 100.0)) == 0.0
    busy, total = processes.machine_cpu_times()
    assert 0 < busy < total


@pytest.mark.parametrize(
    ("value", "share"), [("1/4", (1, 4)), ("0/2", (0, 2)), ("", (0, 1)), ("4/4", (0, 1)), ("x/2", (0, 1))]
)
def test_a_process_takes_the_share_of_ports_its_environment_names(monkeypatch, value, share):
    monkeypatch.setenv("AGENT_PORT_SHARE", value)
    assert processes.share_from_environment() == share


def test_a_process_usage_counts_the_processes_it_started_while_they_run():
    # A parent that only waits, and its child that burns CPU and then waits to be read: as the
    # LM's uvicorn supervisor and its worker processes.
    burn = (
        "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\n"
        "print('done', flush=True)\ntime.sleep(30)"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', {burn!r}])"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its child is killed with it
    )
    try:
        assert parent.stdout is not None and parent.stdout.readline() == "done\n"
        usage = processes.read_usage(parent.pid)
        # The parent alone used ~0.05 s; the child's 0.6 s reads as a little less (/proc counts
        # whole clock ticks).
        assert usage is not None and usage.cpu_seconds >= 0.5
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()
