"""The conductor: drives leagues from closed registration to champion (docs/architecture.md).

A long-running async worker (``manage.py runleague``); the database is the single source of
truth, so any number of conductors may run and any may be killed and started again. Its parts:

- ``worker``: the ``Conductor`` loop, one tick at a time (start here), and its collaborators'
  wiring;
- ``transitions``: a league's and its rounds' state changes, each one transaction;
- the collaborators, each with its own state: ``sending`` (``Sender``: what agents are told, in
  order, never blocking the league), ``dispatcher`` (``Dispatcher``: matches to referees,
  referees that failed left alone), ``supervision`` (``Supervisor``: matches under way),
  ``probing`` (``Prober``: agents that stopped answering), ``arena`` (``ArenaDriver``: an
  arena's continuous pairing); ``shared`` (``Shared``) is what several of them use;
- their database steps: ``dispatch`` (claims, starts settled, matches given back, referee
  failures), ``notices`` (what players are told), ``reachability`` (unreachable players'
  matches decided, agents let back in), ``embedded`` (the LM's built-in referee),
  ``delivery_log`` (the log of what was sent);
- ``common``: what every part shares; ``farewell``: the end notice of a league its organiser
  ended.

Import the part you need (``from league.conductor.worker import Conductor``): the package imports
none of them, so that what needs only ``common`` (the LM's registration, every agent process
through the admin's actions) does not load the conductor's HTTP client and pairing libraries."""
