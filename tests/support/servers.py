"""Helpers to run real agents for tests: the test database URL, processes, waiting for ports."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Sequence

from league.bench import processes
from league.bench.processes import free_port, free_port_run

__all__ = ["REDIS_URL", "Process", "free_port", "free_ports", "live_database_url", "redis_up", "wait_for_port"]

# The same helpers the launcher uses; tests know the run of ports as free_ports.
free_ports = free_port_run

# The Redis of this machine (CI starts it), for the tests that run a variant on it.
REDIS_URL = "redis://127.0.0.1:6379/0"


def redis_up() -> bool:
    """Whether Redis answers at 127.0.0.1:6379."""
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", 6379)) == 0


def live_database_url() -> str:
    """A DATABASE_URL naming the test database pytest-django created (for subprocesses)."""
    from django.db import connection

    settings = connection.settings_dict
    if settings["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{settings['NAME']}"
    user = settings.get("USER") or "postgres"
    host = settings.get("HOST") or "127.0.0.1"
    port = settings.get("PORT") or 5432
    return f"postgres://{user}@{host}:{port}/{settings['NAME']}"


def wait_for_port(port: int, host: str = "127.0.0.1", timeout: float = 60.0) -> None:
    """The launcher's wait, with a default fit for tests: a process that starts Django takes a
    few seconds, many more while parallel workers and agents share a small machine."""
    processes.wait_for_port(port, timeout, host)


class Process:
    """A child process that is always killed at the end of the test."""

    def __init__(self, args: Sequence[str], env: dict[str, str], log_path: str | None = None) -> None:
        self.log = open(log_path, "w") if log_path else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(list(args), env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def terminate(self, timeout: float = 10.0) -> int | None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode
