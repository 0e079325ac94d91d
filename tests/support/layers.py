"""Channel layers for tests of what a failing layer costs: Channels' in-memory layer and
channels_redis's two (its list layer and its pub/sub layer), each with ``fail_once``. A test
selects one as any layer is selected, by its dotted path in ``CHANNEL_LAYERS[alias]["BACKEND"]``
(``IN_MEMORY``, ``REDIS``, ``PUBSUB``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from channels.layers import InMemoryChannelLayer
from channels_redis.core import RedisChannelLayer
from channels_redis.pubsub import RedisPubSubChannelLayer

IN_MEMORY = "tests.support.layers.FaultyInMemoryLayer"
REDIS = "tests.support.layers.FaultyRedisLayer"
PUBSUB = "tests.support.layers.FaultyPubSubLayer"

Method = Literal["send", "receive"]


def always(*args: Any) -> bool:
    return True


@dataclass
class _Fault:
    method: Method
    exc: BaseException
    when: Callable[..., bool]
    failed: list[tuple[Any, ...]] = field(default_factory=list)


class FaultInjection:
    """What the layers below add to their base: calls of ``send`` or ``receive`` that fail on
    the test's word. The layer is shared by the test's thread and the server's, hence the lock."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._faults: list[_Fault] = []
        self._faults_lock = threading.Lock()

    def fail_once(
        self, method: Method, exc: BaseException, when: Callable[..., bool] = always
    ) -> list[tuple[Any, ...]]:
        """The next call of ``method`` whose arguments ``when`` accepts (``channel, message`` for
        send, ``channel`` for receive) raises ``exc`` instead of reaching the layer. Returns the
        list that call's arguments are added to once it failed."""
        fault = _Fault(method, exc, when)
        with self._faults_lock:
            self._faults.append(fault)
        return fault.failed

    def _fault(self, method: Method, *args: Any) -> BaseException | None:
        with self._faults_lock:
            for fault in self._faults:
                if fault.method == method and fault.when(*args):
                    self._faults.remove(fault)
                    fault.failed.append(args)
                    return fault.exc
        return None

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        exc = self._fault("send", channel, message)
        if exc is not None:
            raise exc
        await super().send(channel, message)

    async def receive(self, channel: str) -> dict[str, Any]:
        exc = self._fault("receive", channel)
        if exc is not None:
            raise exc
        return await super().receive(channel)


class FaultyInMemoryLayer(FaultInjection, InMemoryChannelLayer):
    """Channels' in-memory layer (one process), with ``fail_once``."""


class FaultyRedisLayer(FaultInjection, RedisChannelLayer):
    """channels_redis's layer (what several LM processes share), with ``fail_once``."""


class _PubSubLayer(RedisPubSubChannelLayer):
    """channels_redis's pub/sub layer answers ``send`` and ``receive`` through its ``__getattr__``
    (a layer per event loop): named here, so that a subclass can extend them."""

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        await RedisPubSubChannelLayer.__getattr__(self, "send")(channel, message)

    async def receive(self, channel: str) -> dict[str, Any]:
        return await RedisPubSubChannelLayer.__getattr__(self, "receive")(channel)


class FaultyPubSubLayer(FaultInjection, _PubSubLayer):
    """channels_redis's pub/sub layer (the relay's with Redis), with ``fail_once``."""
