# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# Django 6 needs Python 3.12+; use the first one found (pyenv installs count).
BOOT_PY ?= $(shell for p in python3.12 python3.13 python3 /root/.pyenv/versions/3.12*/bin/python3 /root/.pyenv/versions/3.13*/bin/python3; do \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1 && { echo $$p; break; }; done)

.PHONY: demo test setup lint fmt ci bench clean chromium screenshots

$(VENV)/.installed: requirements.txt
	@test -x $(PY) || { test -n "$(BOOT_PY)" || { echo "Python 3.12+ is required"; exit 1; }; $(BOOT_PY) -m venv $(VENV); }
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	@touch $@

# The project's modules are compiled once here: where PYTHONDONTWRITEBYTECODE is set, every
# process (each agent, the LM, the conductor, each test's) would compile them again as it starts.
setup: $(VENV)/.installed
	$(PY) -m compileall -q leagueproto league referee players leaguesite tests
	$(PY) manage.py migrate --noinput -v 0

demo: setup
	$(PY) manage.py demo $(DEMO_ARGS)

# The suite mostly waits (agent processes, timeouts, a browser): TEST_WORKERS processes run it in
# parallel (pytest-xdist); TEST_WORKERS=0 runs it in this one process. A worker left with long tests
# queued has them taken by idle ones (worksteal). A subset: make test PYTEST_ARGS=tests/league
TEST_WORKERS ?= 4
test: setup lint chromium
	$(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

# The screenshots in docs/screenshots/, taken again by the browser tests that show those pages: the
# dashboard's, the check page's and the teacher's admin flow (a plain test run writes them to a
# temporary directory).
screenshots: setup chromium
	UPDATE_SCREENSHOTS=1 $(PY) -m pytest -q -p no:cacheprovider tests/browser/test_live_dashboard.py \
		tests/browser/test_check_page.py tests/browser/test_teacher_flow.py \
		-k "screenshots or plays_but_takes_no_notices or teacher_runs_a_league"

# The browser tests drive Debian's Chromium (browser downloads are impossible here).
chromium:
	@test -x /usr/bin/chromium || { \
		if [ "$$(id -u)" = 0 ]; then apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
		else echo "The browser tests need Debian's chromium: sudo apt-get install chromium"; exit 1; fi; }

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(PY) manage.py makemigrations --check --dry-run -v 0

fmt: $(VENV)/.installed
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: setup
	$(PY) manage.py bench league --players 100 --referees 2 --with-ceiling

clean:
	rm -rf $(VENV) db.sqlite3* .test-db.sqlite3*
