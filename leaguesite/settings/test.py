"""Settings of the test suite (pyproject.toml names them for pytest-django, which exports
DJANGO_SETTINGS_MODULE: the agent processes a test starts read them too)."""

from leaguesite.env import env_int, env_str
from leaguesite.settings.base import *  # noqa: F403
from leaguesite.settings.base import BASE_DIR, DATABASES, REDIS_URL, caches, channel_layers, sqlite_options

# The suite's parallel workers (pytest-xdist names each in PYTEST_XDIST_WORKER, which the agents a
# test starts inherit) each keep their Redis keys under a prefix of their own.
_WORKER = env_str("PYTEST_XDIST_WORKER")
REDIS_PREFIX = env_str("REDIS_PREFIX", f"{_WORKER}:" if _WORKER else "")
CHANNEL_LAYERS = channel_layers(REDIS_URL, REDIS_PREFIX)
CACHES = caches(REDIS_URL, REDIS_PREFIX)
MCP_RATE_LIMIT_PREFIX = env_str("MCP_RATE_LIMIT_PREFIX", f"{REDIS_PREFIX}league:rl:")

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Tests of a database outage shorten the wait for the file's lock (the processes they start
    # inherit it).
    SQLITE_BUSY_TIMEOUT = env_int("SQLITE_BUSY_TIMEOUT", 30)
    DATABASES["default"]["OPTIONS"] = sqlite_options(SQLITE_BUSY_TIMEOUT)
    # A file, not memory, so that agent processes started by tests share the test database; each
    # worktree or run may name its own.
    DATABASES["default"]["TEST"] = {"NAME": env_str("TEST_SQLITE_PATH", str(BASE_DIR / ".test-db.sqlite3"))}
