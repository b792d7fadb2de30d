"""Chat agents whose turns are cut short on purpose, for ``e2e/test_chat_recovery.py``.

``RecoveryChat`` answers by the last user message:

* ``count N``: the words ``c0 … c<N-1>``, 40 ms apart; a continuation picks up after the last
  word the transcript holds, so a reply killed any number of times ends as one unbroken count
  (the healthy turn that keeps making progress);
* ``think``: nothing at all until a later activation — the first time it is asked it waits
  forever (killed before its first chunk), afterwards it answers ``thought`` (the retry);
* ``stall``: one word, then silence, every time; the stall watchdog (500 ms) aborts it and
  recovery continues it until ``max_attempts`` (3) runs out.

``on_exhausted`` counts in KV (``exhausted``) so the test can see it ran once.
"""

from workers import Response, WorkerEntrypoint

from agents import AgentOptions, route_agent_request
from agents.chat import AIChatAgent, ChatRecoveryConfig


def _last_user_text(messages):
    for message in reversed(messages):
        if message.get("role") == "user":
            return "".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")
    return ""


def _last_count(messages):
    for message in reversed(messages):
        if message.get("role") == "assistant":
            words = "".join(
                p.get("text", "") for p in message["parts"] if p["type"] == "text"
            ).split()
            counted = [w for w in words if w.startswith("c") and w[1:].isdigit()]
            return int(counted[-1][1:]) + 1 if counted else 0
    return 0


class RecoveryChat(AIChatAgent):
    options = AgentOptions(keep_alive_interval_ms=1_000)
    chat_stream_stall_timeout_ms = 500

    @property
    def chat_recovery(self):  # a property, so the hook can reach this agent's storage
        return ChatRecoveryConfig(max_attempts=3, on_exhausted=self.exhausted)

    def exhausted(self, _ctx):
        kv = self.ctx.storage.kv
        kv.put("exhausted", (kv.get("exhausted") or 0) + 1)

    async def on_chat_message(self, on_finish, options):
        import asyncio

        text = _last_user_text(self.messages)
        kv = self.ctx.storage.kv
        if text == "think" and not kv.get("thought"):
            kv.put("thought", True)
            await asyncio.Event().wait()  # killed before its first chunk
        start = _last_count(self.messages) if options.continuation else 0
        abort = options.abort_signal

        async def chunks():
            yield {"type": "start"}
            yield {"type": "start-step"}
            yield {"type": "text-start", "id": "t"}
            if text == "think":
                yield {"type": "text-delta", "id": "t", "delta": "thought"}
            elif text == "stall":
                yield {"type": "text-delta", "id": "t", "delta": "stalling "}
                await asyncio.Event().wait()
            elif text.startswith("count "):
                for i in range(start, int(text.split()[1])):
                    if abort.is_set():
                        return
                    yield {"type": "text-delta", "id": "t", "delta": f"c{i} "}
                    await asyncio.sleep(0.04)
            yield {"type": "text-end", "id": "t"}
            yield {"type": "finish-step"}
            yield {"type": "finish"}

        return chunks()


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        routed = await route_agent_request(request, self.env)
        return routed if routed is not None else Response("not found", status=404)
