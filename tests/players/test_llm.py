"""The llm strategy: parsing, every fallback (with an injected fake client), and the real
google-genai client's request, captured by a loopback server that stands in for Gemini."""

from __future__ import annotations

import asyncio
import json
import random
from types import SimpleNamespace
from typing import Any

import pytest

from leagueproto.serve import ThreadedServer
from players.llm import LlmStrategy, parity_prompt, parse_move, parse_parity
from players.strategies.base import MoveSituation, ParitySituation
from tests.players.conftest import ScriptedReferee, player


class FakeGenai:
    """Shaped like google.genai.Client: ``await client.aio.models.generate_content(...)``.

    Each scripted answer is a str (the model's text), an Exception to raise, or ("sleep", s)."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls: list[dict[str, Any]] = []
        self.aio = SimpleNamespace(models=SimpleNamespace(generate_content=self.generate_content))

    async def generate_content(self, *, model: str, contents: str, config: Any = None) -> Any:
        self.calls.append({"model": model, "contents": contents, "config": config})
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, tuple):
            await asyncio.sleep(answer[1])
            answer = "even"
        return SimpleNamespace(text=answer)


def situation(budget: float = 2.0, history: tuple[str, ...] = ("even",) * 5) -> ParitySituation:
    return ParitySituation(
        player_id="P01",
        opponent_id="P07",
        match_id="R3M2",
        round_id=3,
        your_standings={"wins": 2, "losses": 1, "draws": 0},
        opponent_history=history,
        recent_matches=({"opponent_id": "P05", "my_choice": "odd", "opponent_choice": "even", "result": "WIN"},),
        league_standings=({"rank": 1, "player_id": "P07", "points": 6},),
        budget=budget,
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("odd", "odd"),
        ("Even", "even"),
        (" EVEN.\n", "even"),
        ("**odd**", "odd"),
        ("Answer: odd", "odd"),
        ("even or odd", None),
        ("I would pick odd because the opponent likes even", None),
        ("", None),
        ("3", None),
        (None, None),
    ],
)
def test_it_parses_one_word_answers(text, expected):
    assert parse_parity(text) == expected


def test_it_parses_bo5_numbers():
    assert parse_move("3") == 3 and parse_move("Number: 5.") == 5
    assert parse_move("6") is None and parse_move("1 or 2") is None and parse_move("three") is None


async def test_it_answers_what_the_model_says_and_builds_the_prompt_from_the_situation():
    fake = FakeGenai("Even")
    strategy = LlmStrategy(client=fake, model="gemini-test", rng=random.Random(1))
    assert await strategy.choose_parity(situation()) == "even"
    call = fake.calls[0]
    assert call["model"] == "gemini-test"
    prompt = call["contents"]
    for needle in ("P07", "'wins': 2", "even 5 times", "P05", "Reply with exactly one word"):
        assert needle in prompt
    assert call["config"].max_output_tokens == 5
    assert strategy.stats["answered"] == 1


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("banana", "fallback:malformed"),
        ("even... no, odd", "fallback:malformed"),
        (RuntimeError("429 RESOURCE_EXHAUSTED"), "fallback:error"),
        (("sleep", 5.0), "fallback:timeout"),
    ],
)
async def test_it_falls_back_to_adaptive(answer, reason):
    strategy = LlmStrategy(client=FakeGenai(answer), timeout=5.0, rng=random.Random(1))
    # The opponent always said even: adaptive (the fallback) answers odd, within the budget.
    choice = await asyncio.wait_for(strategy.choose_parity(situation(budget=0.3)), 1.0)
    assert choice == "odd"
    assert strategy.stats[reason] == 1


async def test_it_falls_back_without_an_api_key(monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    strategy = LlmStrategy(rng=random.Random(1))
    assert strategy.client is None
    assert await strategy.choose_parity(situation()) == "odd"
    assert await strategy.choose_move(MoveSituation("P01", "P07", "R1M1", "EVEN", opponent_moves=(1, 3) * 4)) % 2
    assert strategy.stats["fallback:no_api_key"] == 2


async def test_it_does_not_call_the_model_when_there_is_no_time_left():
    fake = FakeGenai()
    strategy = LlmStrategy(client=fake, rng=random.Random(1))
    assert await strategy.choose_parity(situation(budget=0.05)) == "odd"
    assert fake.calls == [] and strategy.stats["fallback:no_time"] == 1


async def test_it_asks_for_bo5_moves_too():
    strategy = LlmStrategy(client=FakeGenai("4", "seven"), rng=random.Random(1))
    s = MoveSituation("P01", "P07", "R1M1", "ODD", game_round=2, opponent_moves=(2, 4, 2, 2, 4))
    assert await strategy.choose_move(s) == 4
    assert await strategy.choose_move(s) % 2 == 1  # adaptive: opponent plays even, ODD answers odd


async def test_a_player_with_a_slow_llm_still_answers_in_time(serve_players, referee_client):
    strategy = LlmStrategy(client=FakeGenai(("sleep", 10.0)), rng=random.Random(1))
    p = player("Oracle", strategy_obj=strategy, decision_cap=0.8)
    serve_players(p)
    ref = ScriptedReferee(referee_client, p.endpoint, player_id="Oracle")
    await ref.call("handle_game_invitation", ref.invitation())
    # The deadline is far enough that the 0.8 s cap decides the budget (0.55 s, of which the model
    # gets 0.35: llm.FALLBACK_RESERVE); the referee waits 1 s.
    reply = (await ref.call("choose_parity", ref.parity_call(seconds=5), timeout=1.0)).reply
    assert reply["parity_choice"] in ("even", "odd")
    assert p.in_play["R1M1"]["decided_by"] == "strategy"  # the llm strategy fell back by itself
    assert strategy.stats["fallback:timeout"] == 1


class GeminiRecorder:
    """An ASGI app standing in for the Gemini API on loopback: records requests, answers one."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.requests: list[dict[str, Any]] = []

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        more = True
        while more:
            event = await receive()
            body += event.get("body", b"")
            more = event.get("more_body", False)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.requests.append({"path": scope["path"], "headers": headers, "body": json.loads(body or b"{}")})
        reply = {
            "candidates": [{"content": {"role": "model", "parts": [{"text": self.text}]}, "finishReason": "STOP"}],
            "modelVersion": "gemini-2.5-flash",
        }
        data = json.dumps(reply).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": data})


async def test_the_real_google_genai_client_sends_the_request_we_expect():
    recorder = GeminiRecorder("odd")
    server = ThreadedServer(recorder, lifespan="off").start()
    try:
        base_url = f"http://127.0.0.1:{server.ports[0]}/"
        strategy = LlmStrategy(api_key="fake-key-for-tests", base_url=base_url, timeout=3.0, rng=random.Random(1))
        choice = await strategy.choose_parity(situation(budget=3.0, history=("odd", "even")))
    finally:
        server.stop()
    assert choice == "odd" and strategy.stats["answered"] == 1
    request = recorder.requests[0]
    assert request["path"].endswith("/models/gemini-2.5-flash:generateContent")
    assert request["headers"]["x-goog-api-key"] == "fake-key-for-tests"
    body = request["body"]
    assert body["contents"][0]["parts"][0]["text"] == parity_prompt(situation(history=("odd", "even")))
    assert body["generationConfig"]["maxOutputTokens"] == 5
    assert list(body["generationConfig"]["thinkingConfig"].values()) == [0]  # no thinking: one word, fast
