"""The ``llm`` strategy: ask Gemini (through google-genai) for one word, validate it, fall back.

Any failure falls back to the adaptive strategy: no ``GEMINI_API_KEY``, an API error, a
malformed answer, or an answer that would come too late for the deadline. Settings come from
the environment (``GEMINI_API_KEY``, ``GEMINI_MODEL``, ``GEMINI_TIMEOUT`` seconds,
``GEMINI_BASE_URL``) or from ``runplayer --llm-model/--llm-timeout``.

google-genai is imported with this module, which only ``make_strategy("llm")`` loads (its
import takes a noticeable fraction of a second, which must not happen inside a deadline).

The client is anything shaped like ``google.genai.Client``: ``await
client.aio.models.generate_content(model=..., contents=..., config=...)`` returning an object
with ``.text``. Tests inject a fake with that shape.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import re
from collections import Counter
from typing import Any

from google import genai
from google.genai import types

from players.strategies.adaptive import Adaptive
from players.strategies.base import MoveSituation, ParitySituation, Strategy

log = logging.getLogger(__name__)

DEFAULT_MODEL = "gemini-2.5-flash"
DEFAULT_TIMEOUT = 8.0
# Time kept back from the budget so the fallback still answers before the deadline, and before
# the player's own cap on the strategy (players/agent.py ``decide``) gives the safe move instead:
# an event loop on a busy machine wakes a timer tenths of a second late, and with 0.05 s both
# timers were due in the same turn, the player's winning (a suite run on two loaded cores).
FALLBACK_RESERVE = 0.2

RULES_PARITY = (
    "You play the Even/Odd game in a league. Both players say 'even' or 'odd'. If both say the same, "
    "the match is a draw (1 point each). Otherwise a number from 1 to 10 is drawn uniformly at random and "
    "whoever named its parity wins (3 points, the other 0). So naming the parity your opponent will NOT "
    "name is worth 1.5 points on average, naming the same one is worth 1."
)
RULES_MOVE = (
    "You play a best-of-5 Even/Odd game. Each round both players pick a whole number from 1 to 5. "
    "If the sum is odd the ODD player wins the round, if it is even the EVEN player wins. First to 3 rounds wins."
)


def make_genai_client(api_key: str, *, timeout: float, base_url: str | None = None) -> Any:
    """A real google-genai client: one attempt (we have our own fallback), timeout in ms."""
    options = types.HttpOptions(
        timeout=int(timeout * 1000),
        base_url=base_url,
        retry_options=types.HttpRetryOptions(attempts=1),
    )
    return genai.Client(api_key=api_key, http_options=options)


def parse_parity(text: Any) -> str | None:
    """'even' / 'odd' from a short answer ("Odd.", "**even**", "Answer: odd"), else None."""
    if not isinstance(text, str):
        return None
    words = re.findall(r"[a-z]+", text.lower())
    named = {w for w in words if w in ("even", "odd")}
    if len(named) != 1 or len(words) > 3:
        return None
    return named.pop()


def parse_move(text: Any) -> int | None:
    """A single number 1-5 from a short answer ("3", "3.", "Number: 3"), else None."""
    if not isinstance(text, str) or len(text) > 40:
        return None
    numbers = re.findall(r"-?\d+", text)
    if len(numbers) != 1:
        return None
    value = int(numbers[0])
    return value if 1 <= value <= 5 else None


def parity_prompt(s: ParitySituation) -> str:
    opponent = s.opponent_id or "unknown"
    seen = Counter(s.opponent_history)
    lines = [
        RULES_PARITY,
        f"Your opponent is {opponent}. Your record so far: {dict(s.your_standings) or 'no matches yet'}.",
        f"{opponent}'s earlier choices against you (oldest first): {list(s.opponent_history[-10:]) or 'none'}"
        f" (even {seen['even']} times, odd {seen['odd']} times).",
    ]
    if s.recent_matches:
        recent = [
            f"{m.get('opponent_id')}: you {m.get('my_choice')}, they {m.get('opponent_choice')}, {m.get('result')}"
            for m in s.recent_matches[-5:]
        ]
        lines.append("Your last matches: " + "; ".join(recent) + ".")
    if s.league_standings:
        top = [f"{r.get('rank')}. {r.get('player_id')} {r.get('points')} pts" for r in s.league_standings[:5]]
        lines.append("League standings: " + ", ".join(top) + ".")
    lines.append("Reply with exactly one word: even or odd.")
    return "\n".join(lines)


def move_prompt(s: MoveSituation) -> str:
    return "\n".join(
        [
            RULES_MOVE,
            f"You play {s.role} against {s.opponent_id or 'unknown'}. This is game round {s.game_round}; "
            f"scores: {dict(s.scores)}.",
            f"The opponent's earlier numbers against you (oldest first): {list(s.opponent_moves[-15:]) or 'none'}.",
            "Reply with exactly one number from 1 to 5.",
        ]
    )


class LlmStrategy(Strategy):
    name = "llm"

    def __init__(
        self,
        rng: random.Random | None = None,
        *,
        client: Any = None,
        model: str | None = None,
        timeout: float | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        fallback: Strategy | None = None,
        **options: Any,
    ) -> None:
        super().__init__(rng, **options)
        self.fallback = fallback or Adaptive(rng=self.rng)
        self.model = model or os.environ.get("GEMINI_MODEL") or DEFAULT_MODEL
        self.timeout = float(timeout if timeout is not None else os.environ.get("GEMINI_TIMEOUT", DEFAULT_TIMEOUT))
        self._api_key = api_key if api_key is not None else os.environ.get("GEMINI_API_KEY", "")
        self._base_url = base_url or os.environ.get("GEMINI_BASE_URL") or None
        self._client = client
        self.stats: Counter[str] = Counter()  # answered / fallback reasons, for get_player_state

    @property
    def client(self) -> Any:
        if self._client is None and self._api_key:
            self._client = make_genai_client(self._api_key, timeout=self.timeout, base_url=self._base_url)
        return self._client

    def _config(self, max_tokens: int) -> Any:
        return types.GenerateContentConfig(
            temperature=0.7,
            max_output_tokens=max_tokens,
            thinking_config=types.ThinkingConfig(thinking_budget=0),
        )

    async def _ask(self, prompt: str, budget: float, max_tokens: int) -> str | None:
        """The model's text, or None (with the reason counted) when it cannot be used in time."""
        client = self.client
        if client is None:
            self.stats["fallback:no_api_key"] += 1
            return None
        wait = min(self.timeout, budget - FALLBACK_RESERVE)
        if wait <= 0:
            self.stats["fallback:no_time"] += 1
            return None
        try:
            async with asyncio.timeout(wait):
                response = await client.aio.models.generate_content(
                    model=self.model, contents=prompt, config=self._config(max_tokens)
                )
            return getattr(response, "text", None)
        except TimeoutError:
            self.stats["fallback:timeout"] += 1
            log.info("llm: no answer within %.2f s, falling back", wait)
        except Exception as exc:  # any API or transport error: the fallback answers
            self.stats["fallback:error"] += 1
            log.info("llm: %s: %s, falling back", type(exc).__name__, exc)
        return None

    async def choose_parity(self, situation: ParitySituation) -> str:
        text = await self._ask(parity_prompt(situation), situation.budget, max_tokens=5)
        choice = parse_parity(text)
        if choice is not None:
            self.stats["answered"] += 1
            return choice
        if text is not None:
            self.stats["fallback:malformed"] += 1
            log.info("llm: unusable answer %r, falling back", text[:80] if isinstance(text, str) else text)
        return self.fallback.choose_parity(situation)

    async def choose_move(self, situation: MoveSituation) -> int:
        text = await self._ask(move_prompt(situation), situation.budget, max_tokens=5)
        move = parse_move(text)
        if move is not None:
            self.stats["answered"] += 1
            return move
        if text is not None:
            self.stats["fallback:malformed"] += 1
        return self.fallback.choose_move(situation)
