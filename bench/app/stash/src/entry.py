"""The stash() row's agent (bench/micro.py): ``self.stash()`` inside ``run_fiber``, as agent code
calls it, each stash followed by output that leaves the object.

A WebSocket client (``/agents/stash-bench/<name>``) sends ``{"n": N, "bytes": B, "mode": M}``;
``on_message`` runs a fiber of N steps and answers ``{"done": N}`` when it has returned:

* ``turn``: each step stashes a snapshot of about B bytes (``self.stash`` serialises it and
  updates the fiber's row), sends the step number to the client and ends its turn, so every
  stash is its own commit and its frame leaves only once that commit is durable (at
  ``--durability power``, after the fsync covering it: the output gate).
* ``batch``: the N stashes in one turn, then one frame: one commit.

The client's clock runs from the request to the ``done`` frame, so every commit and, at
``power``, the fsyncs the frames waited for are in the row.
"""

import asyncio
import json

from workers import Response, WorkerEntrypoint

from agents import Agent, route_agent_request


class StashBench(Agent):
    async def on_message(self, connection, message):
        request = json.loads(str(message))
        n, per_turn = int(request["n"]), request.get("mode", "turn") == "turn"
        pad = "x" * max(0, int(request.get("bytes", 1024)) - 24)

        async def work(fiber):
            for step in range(n):
                self.stash({"step": step, "pad": pad})
                if per_turn:
                    connection.send(str(step))  # leaves once this stash is durable
                    await asyncio.sleep(0)  # the turn ends: the stash commits
            return n

        done = await self.run_fiber("bench-stash", work)
        connection.send(json.dumps({"done": done}))


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        routed = await route_agent_request(request, self.env)
        return routed if routed is not None else Response("not found", status=404)
