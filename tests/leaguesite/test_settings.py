"""The settings package (leaguesite/settings/): production without the suite's concerns, the test
settings reaching the processes a test starts, and the channel layers with and without Redis."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT

SHOW = (
    "import json, django; django.setup(); from django.conf import settings as s; "
    "layer = s.CHANNEL_LAYERS['default']; "
    "print(json.dumps({'module': s.SETTINGS_MODULE, 'prefix': s.REDIS_PREFIX, "
    "'test_db': s.DATABASES['default'].get('TEST', {}).get('NAME'), 'busy': s.SQLITE_BUSY_TIMEOUT, "
    "'capacity': layer.get('CONFIG', {}).get('capacity'), "
    "'layers': {k: [v['BACKEND'], v.get('CONFIG', {}).get('prefix')] for k, v in s.CHANNEL_LAYERS.items()}}))"
)


def _settings(module: str, tmp_path, script: str = SHOW, **env: str) -> dict | list:
    """What ``script`` prints (JSON) in a fresh process with ``module`` as its settings."""
    base = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "SECRET_KEY_FILE": str(tmp_path / "secret")}
    base["DJANGO_SETTINGS_MODULE"] = module
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**base, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


SUITE_ENV = {"PYTEST_XDIST_WORKER": "gw3", "TEST_SQLITE_PATH": "/tmp/elsewhere.sqlite3", "SQLITE_BUSY_TIMEOUT": "1"}


def test_production_settings_ignore_the_suites_variables(tmp_path):
    shown = _settings("leaguesite.settings.production", tmp_path, **SUITE_ENV)
    assert shown["prefix"] == "" and shown["test_db"] is None and shown["busy"] == 30


def test_the_test_settings_take_them(tmp_path):
    shown = _settings("leaguesite.settings.test", tmp_path, **SUITE_ENV)
    assert shown["prefix"] == "gw3:" and shown["test_db"] == "/tmp/elsewhere.sqlite3" and shown["busy"] == 1


def _module_of_manage_py(manage_py: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(
        [
            *manage_py,
            "shell",
            "--no-imports",
            "-c",
            "from django.conf import settings; print(settings.SETTINGS_MODULE)",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_processes_a_test_starts_read_the_test_settings(agent_env, manage_py):
    assert os.environ["DJANGO_SETTINGS_MODULE"] == "leaguesite.settings.test"  # exported by pytest-django
    assert _module_of_manage_py(manage_py, agent_env) == "leaguesite.settings.test"


def test_manage_py_defaults_to_the_production_settings(manage_py, tmp_path):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "SECRET_KEY_FILE": str(tmp_path / "secret")}
    assert _module_of_manage_py(manage_py, env) == "leaguesite.settings.production"


def test_with_redis_the_relay_has_a_pub_sub_layer_of_its_own(tmp_path):
    """The site's events and pushes wait in channels_redis's lists (with room for a burst); the
    relay's calls and replies are published (league/relay/layer.py says why). Both under the
    site's prefix."""
    shown = _settings("leaguesite.settings.production", tmp_path, REDIS_URL="redis://127.0.0.1:1/0", REDIS_PREFIX="a:")
    assert shown["layers"] == {
        "default": ["channels_redis.core.RedisChannelLayer", "a:asgi"],
        "relay": ["channels_redis.pubsub.RedisPubSubChannelLayer", "a:relay:"],
    }
    assert shown["capacity"] == 8000
    shown = _settings("leaguesite.settings.production", tmp_path)
    assert shown["layers"] == {"default": ["channels.layers.InMemoryChannelLayer", None]}  # one process


def test_starting_django_loads_no_server_or_pairing_library(tmp_path):
    """Every agent, conductor and command sets Django up: it costs what they use, not Twisted
    (daphne's server: runserver alone imports it) nor networkx (a Swiss round's pairing)."""
    show = (
        "import django, json, sys; django.setup(); "
        "print(json.dumps(sorted(m for m in ('twisted', 'daphne', 'networkx') if m in sys.modules)))"
    )
    assert _settings("leaguesite.settings.production", tmp_path, show) == []


CACHE_SHOW = (
    "import json, django; django.setup(); from django.conf import settings as s; "
    "from django.core.cache import cache; kept = cache.get('snapshot'); cache.delete('snapshot'); "
    "c = s.CACHES['default']; print(json.dumps({'backend': c['BACKEND'], 'prefix': c.get('KEY_PREFIX', ''), "
    "'kept': kept.decode() if kept else None}))"
)


def test_with_redis_the_lm_processes_share_one_cache(tmp_path):
    """A snapshot or page one LM process built is there for the others (league/api/live.py):
    with REDIS_URL Django's cache is Redis, under the site's prefix; without, each process's own."""
    shown = _settings("leaguesite.settings.production", tmp_path, script=CACHE_SHOW)
    assert shown == {"backend": "django.core.cache.backends.locmem.LocMemCache", "prefix": "", "kept": None}
    env = {"REDIS_URL": "redis://127.0.0.1:6379/0", "REDIS_PREFIX": f"settings-test-{os.getpid()}:"}
    put = "from django.core.cache import cache; cache.set('snapshot', b'built once', 30); "
    _settings("leaguesite.settings.production", tmp_path, script=put + "print('{}')", **env)
    shown = _settings("leaguesite.settings.production", tmp_path, script=CACHE_SHOW, **env)
    assert shown == {
        "backend": "django.core.cache.backends.redis.RedisCache",
        "prefix": f"settings-test-{os.getpid()}:cache",
        "kept": "built once",
    }
