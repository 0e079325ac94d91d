"""The Redis channel layer with fewer round trips to Redis per message: the relay sends every call
that crosses LM processes, and its reply, through it (settings.CHANNEL_LAYERS).

channels_redis's layer sends a message in four commands (drop the expired, count, add, set the
expiry) and takes each message off a process's list in four more, one message at a time for the
whole process (restore the interrupted, block for one, back it up; then clear the backup). This
layer sends in one script and, when a message is already waiting, takes it in one script and the
clearing: the same commands, run in Redis, with the same guarantees (capacity, expiry, a message
taken by a read that is cancelled goes back to the list).
"""

from __future__ import annotations

import time
from typing import Any

from channels.exceptions import ChannelFull
from channels_redis.core import RedisChannelLayer as BaseRedisChannelLayer

# KEYS: the channel's list. ARGV: the message, now, the score below which messages expired, the
# expiry in seconds, the capacity. 0 when the list is full (nothing added), else 1.
SEND = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, ARGV[3])
if redis.call('ZCOUNT', KEYS[1], '-inf', '+inf') >= tonumber(ARGV[5]) then
    return 0
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
"""

# KEYS: the list, its backup. Put back what an interrupted read left in the backup, take the
# oldest message and back it up (channels_redis clears the backup once the message is read).
TAKE_WAITING = """
local backed_up = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = #backed_up, 1, -2 do
    redis.call('ZADD', KEYS[1], backed_up[i], backed_up[i - 1])
end
redis.call('DEL', KEYS[2])
local taken = redis.call('ZPOPMIN', KEYS[1])
if taken[1] then
    redis.call('ZADD', KEYS[2], taken[2], taken[1])
    return taken[1]
end
return false
"""


class RedisChannelLayer(BaseRedisChannelLayer):
    async def send(self, channel: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "message is not a dict"
        assert self.require_valid_channel_name(channel), "Channel name not valid"
        assert "__asgi_channel__" not in message
        channel_non_local_name = channel
        if "!" in channel:  # a process-local channel: the message names it, the list is the process's
            message = {**message, "__asgi_channel__": channel}
            channel_non_local_name = self.non_local_name(channel)
            index = self.consistent_hash(channel)
        else:
            index = next(self._send_index_generator)
        now = time.time()
        added = await self.connection(index).eval(
            SEND,
            1,
            self.prefix + channel_non_local_name,
            self.serialize(message),
            now,
            int(now) - int(self.expiry),
            int(self.expiry),
            self.get_capacity(channel),
        )
        if not added:
            raise ChannelFull()

    async def _brpop_with_clean(self, index: int, channel: str, timeout: float) -> bytes | None:
        taken = await self.connection(index).eval(TAKE_WAITING, 2, channel, self._backup_channel_name(channel))
        if taken is not None:
            return taken
        return await super()._brpop_with_clean(index, channel, timeout)
