"""The conductor: drives leagues from closed registration to champion (docs/architecture.md).

A long-running async worker (``manage.py runleague``); the database is the single source of
truth, so any number of conductors may run and any may be killed and started again. Its parts:

- ``worker``: the ``Conductor`` loop, one tick at a time (start here);
- ``transitions``: a league's and its rounds' state changes, each one transaction;
- ``dispatch``: matches claimed for referees, START_MATCH, referee failures;
- ``supervision``: matches under way watched, agents marked unreachable probed;
- ``sending`` and ``notices``: what players are told, in order, never blocking the league;
- ``reachability``: unreachable players' matches decided, agents let back in;
- ``embedded``: the LM's built-in referee (the real referee runner, in-process);
- ``delivery_log`` and ``common``: the log of what was sent, and what every part shares.
"""

from league.conductor.common import SUSPEND_AFTER, Delivery
from league.conductor.worker import Conductor

__all__ = ["SUSPEND_AFTER", "Conductor", "Delivery"]
