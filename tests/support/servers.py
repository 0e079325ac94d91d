"""Helpers to run real agents for tests: the test database URL, processes, waiting for ports."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from league.bench import processes
from league.bench.processes import free_port, free_port_run

__all__ = [
    "REDIS_URL",
    "Process",
    "default_database_in",
    "free_port",
    "free_ports",
    "live_database_url",
    "redis_up",
    "wait_for_port",
]

ROOT = Path(__file__).resolve().parents[2]

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


def default_database_in(directory: Path, env: Mapping[str, str]) -> tuple[dict[str, str], Path]:
    """The environment of a ``manage.py`` process on the embedded default (no DATABASE_URL) whose
    default database is ``directory/db.sqlite3`` rather than the checkout's, and that path: SQLite
    creates the file when a process connects, so a test sees whether it was opened. A process
    given DATABASE_URL (the agents a bench starts) keeps that database."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "db.sqlite3"
    (directory / "default_elsewhere.py").write_text(
        "import os\n\n"
        "from leaguesite.settings.production import *  # noqa: F403\n\n"
        "if not os.environ.get('DATABASE_URL'):\n"
        f"    DATABASES['default']['NAME'] = {str(path)!r}  # noqa: F405\n"
    )
    env = {key: value for key, value in env.items() if key != "DATABASE_URL"}
    env.update(DJANGO_SETTINGS_MODULE="default_elsewhere", PYTHONPATH=f"{directory}{os.pathsep}{ROOT}")
    return env, path


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
