"""The issue's performance targets and, for each, what would close a miss (bench/summarize.py).

For a missed target, the profile (profiles/summary.json) gives the numbers and ADVICE says what
they mean in terms of the code as it is: keep it true when the code changes.
"""

from __future__ import annotations

__all__ = ["ADVICE", "TARGETS"]

# (row id, kind, threshold, text). kind "ratio_min"/"ratio_max": doemu/workerd >= / <=
# threshold (a time row's ratio is doemu's time over workerd's, lower is better); "max"/"min":
# the doemu value itself. Judged on the worst round (bench/summarize.py): the lowest per-round
# ratio (each round's doemu run against the same round's workerd run), the highest value under a
# ceiling, the lowest above a floor; the median is shown beside it. doemu is the
# power-durability run (workerd's durability: every commit durable before its output leaves);
# rows that write also run at process durability, shown next to it but not judged. Where the
# shared harness (crosscheck.py) measured the row too, a target counts as met only if both
# harnesses find it met. The chat fan-out is judged on the agent a user writes (model_reply over
# OpenAIChatCompletions); its lighter hand-written path is shown beside it, not judged.
TARGETS: list[tuple[str, str, float, str]] = [
    ("ping_c32", "ratio_min", 1.2, "ping c=32 ≥ 1.2× workerd"),
    ("incr_spread", "ratio_min", 1.5, "incr over 1,000 objects c=32 ≥ 1.5× workerd"),
    ("incr_c1", "ratio_min", 1.5, "incr on one object, c=1 ≥ 1.5× workerd"),
    (
        "incr_c1_floor",
        "min",
        0.9,
        "incr on one object, c=1 ≥ 90 % of a bare write+fdatasync loop (the disk's limit)",
    ),
    ("incr_c32", "ratio_min", 1.5, "incr on one object, c=32 ≥ 1.5× workerd"),
    ("create_rate", "ratio_min", 1.5, "new objects per second ≥ 1.5× workerd"),
    ("ws_50_one", "ratio_min", 1.0, "WebSocket echo, 50 connections (1 object) ≥ 1.0× workerd"),
    ("ws_50_many", "ratio_min", 1.0, "WebSocket echo, 50 connections (50 objects) ≥ 1.0× workerd"),
    ("cold_p50", "max", 1.0, "cold first request p50 ≤ 1.0 ms"),
    ("alarm_p99", "max", 5.0, "100 alarms at +100 ms: p99 lateness ≤ 5 ms"),
    ("rss_10k", "max", 250.0, "RSS after 10,000 objects ≤ 250 MB"),
    (
        "rss_evicted_frac",
        "max",
        1.1,
        "RSS after 10,000 objects are evicted ≤ 1.1× the fresh server's",
    ),
    ("restart", "max", 0.10, "restart after SIGKILL to first successful read ≤ 0.10 s"),
    (
        "restart",
        "ratio_max",
        1.5,
        "restart after SIGKILL to first successful read ≤ 1.5× workerd's",
    ),
    ("start_ready", "ratio_max", 1.5, "start to first ping (fresh state) ≤ 1.5× workerd's"),
    ("stash_turn", "min", 20000.0, "stash() ≥ 20,000/s"),
    ("startup_ready", "max", 1.0, "100,000-object start-up: ready ≤ 1 s"),
    (
        "chat_fanout",
        "ratio_min",
        1.0,
        "chat: chunks/s, one turn fanned out to 10 clients ≥ 1.0× the JavaScript SDK",
    ),
    ("chat_replay", "max", 50.0, "chat: replay of 1,000 chunks on reconnect ≤ 50 ms"),
    (
        "chat_many",
        "ratio_min",
        1.0,
        "chat: chunks/s, 100 chats streaming one turn each at once ≥ 1.0× the JavaScript SDK",
    ),
]

# What would close each miss: the profile (profiles/summary.json) gives the numbers; this says
# what they mean. Only shown for rows that miss their target.
ADVICE: dict[str, str] = {
    "ping_c32": (
        "ping does no storage work, so the profile is the request path itself: uvicorn's "
        "httptools protocol, `DoemuApp._http`/`_dispatch`, the `Default` entry's `stub.fetch` "
        "and `ObjectHost.call`, on uvloop. What is left is per-request Python: building the "
        "`Request` from the ASGI scope and the two ASGI sends of the response; a response path "
        "that hands uvicorn headers and body in one message, or a server protocol of doemu's own "
        "for object traffic, are the next levers."
    ),
    "incr_spread": (
        "the same request path as ping plus one SQL statement and one commit per request; if "
        "`StorageConnection.__init__` appears, objects are being evicted and re-opened within "
        "the window (live cap smaller than the 1,000 objects), otherwise the request path levers "
        "of the ping row apply."
    ),
    "incr_c1": (
        "at power durability every acknowledged incr waits until the fsync covering its commit "
        "has returned: the commit runs on the loop, the object's WAL is fsynced by a pool "
        "thread and the output gate holds the response until then "
        "(`doemu/storage/durability.py`). With one request in flight nothing can share that "
        "fsync, so each request pays the whole round trip (loop → pool thread → disk → loop), "
        "which workerd pays inside `COMMIT` on its own thread; in the profile that wait is "
        "`EpollSelector.select` self time. The process-durability column shows the same "
        "request path without it."
    ),
    "incr_c1_floor": (
        "one request at a time cannot share an fsync, so each acknowledged incr costs one "
        "durable write of the disk plus everything else of the request, which does not overlap "
        "it: the HTTP request and response, the handler, the SQL statement and the commit on "
        "the loop, and the hand-off to the fsync thread and back. The fraction is "
        "disk / (disk + request path): on a fast disk (a write+fdatasync of ~200 µs) the "
        "request path's ~150 µs (the ping c=1 row) alone caps it near 55-60 %; it rises toward "
        "1 as the disk gets slower. The bare loop's fdatasync is what doemu's WAL fsync is "
        "(`doemu/storage/durability.py`); workerd's fraction beside it pays its own request "
        "path the same way. What is left is the request path itself (the ping row's levers)."
    ),
    "incr_c32": (
        "at power durability one fsync covers every commit made while the previous one was in "
        "flight, so on one object the 32 requests share fsyncs and the row is bound by the "
        "request path plus one commit each (see the ping and incr-over-1,000 rows); if the "
        "profile shows the loop mostly waiting (`EpollSelector.select`), the fsync round trips "
        "are not overlapping with the next commits."
    ),
    "create_rate": (
        "a new object is a new SQLite file: the spare renamed into place and SQLite's first "
        "access (see the cold row), then its first commit; at power durability the new file "
        "and its directory entry are fsynced before first use, and when the live cap is reached "
        "every creation also evicts (closes) the least recently used object. The profile splits "
        "these."
    ),
    "ws_50_one": (
        "see the next row: every message takes the same path whichever object it reaches."
    ),
    "ws_50_many": (
        "the server is CPU-bound (one core). Per message: uvicorn's sans-I/O websockets "
        "protocol parses the frame, the handler starts in the task that read it (no task per "
        "frame), and the echo is written with the other frames of the same loop turn. What is "
        "left is mostly the websockets library's frame parsing and uvicorn's protocol, both in "
        "Python; a WebSocket protocol of doemu's own with less Python per frame is the lever. "
        "workerd's value on this row varies most between runs (see the per-run table)."
    ),
    "cold_p50": (
        "a first request is mostly the new object's SQLite file: the spare renamed into place "
        "(`ObjectFiles.create`, three renames) and SQLite's first access "
        "(`PRAGMA journal_mode=WAL`: opening the -wal, truncating and re-extending the -shm, "
        "mapping it and building the WAL index), on the loop thread; at power durability also "
        "the fsyncs that make the new file durable before its first output. When the worker "
        "thread has no spare ready (at power it fsyncs each spare and the spare directory as it "
        "makes them, so back-to-back first requests can outrun it), the template is written in "
        "place on the loop (`write_template` in the profile). Most of that is "
        "kernel time in file operations, not Python: traced with strace on this machine, a new "
        "object costs about six `openat` calls in doemu (counting the worker thread's spares) as "
        "in workerd, each a few hundred microseconds on this ext4, and about 85 % of either "
        "server's CPU in the cold phase is system time; the same kernel work costs more or less "
        "as the shared disk is busier, which is why this row drifts within and between sittings "
        "for both servers. Tried while building "
        "this (cold and alarm probes, A/B on one machine): opening the file on a worker thread "
        "(no gain: the hand-off costs what the wait saved), no closes at all (no gain), "
        "`PRAGMA locking_mode=EXCLUSIVE` (WAL index in heap memory, no -shm: about 25 % off a "
        "cold request under load, but a live object's file could then not be read by the admin "
        "API's read-only connections or by the sqlite3 shell while the server runs, a price "
        "doemu does not pay). Closing it needs fewer file-system operations on the first "
        "request, e.g. the WAL index in shared memory on tmpfs, which the stdlib sqlite3 module "
        "cannot do without a VFS of doemu's own."
    ),
    "alarm_p99": (
        "a due alarm goes before any event that starts after its time "
        "(`AlarmScheduler.preempting`), so an alarm waits at most for the event already "
        "running. The tail is what those events do: the 100 alarm objects are new, and while "
        "the client sets alarms (10 in flight) one object creation now and then waits 10–20 ms "
        "off-CPU inside the file-system work of the cold row (SQLite's first access, the "
        "renames), with no slow system call to show for it; every alarm due during such a "
        "wait is that late. p50 stays at 0–1 ms. Opening files on a worker thread was tried "
        "and left p99 at 10–15 ms, so the waits are not only in the open; exclusive locking "
        "(no -shm, see the cold row) brought it to 7–14 ms. The levers are the cold row's."
    ),
    "rss_10k": (
        "RSS per live object is nearly all native memory held by the object's open SQLite "
        "connection (lookaside, page cache, schema, prepared statements: doemu caches up to 256 "
        "per connection), not Python objects (see the tracemalloc split), and it is not "
        "returned to the operating system after eviction. RSS after 10,000 objects is therefore "
        "about the live cap times the per-object cost: a lower live cap, a smaller "
        "per-connection cache or `malloc_trim` after evicting a batch would bring it down."
    ),
    "rss_evicted_frac": (
        "what evicted objects leave behind is freed (their hosts are not kept by their idle "
        "deadlines, `doemu/objects/eviction.py`) and, after the burst, collected and handed back "
        "with `malloc_trim` (`doemu/storage/trim.py`); what stays is fragmentation: Python's "
        "small-object allocator keeps a 1 MiB arena while any block in it lives, and after "
        "10,000 objects went through, the few blocks that outlive them (caches, the events "
        "history, interned strings) are spread over most of the arenas the load created "
        "(in process: 77 arenas of 1 MiB holding 11 MB of live blocks). With "
        "`PYTHONMALLOC=malloc` the same run ends at 1.9× the fresh RSS instead of 3.4×, so "
        "glibc's heap fragments the same way, only less."
    ),
    "restart": (
        "the time to the first read after a SIGKILL is almost all interpreter start-up and "
        "imports (see the import-time split); Starlette, aiosqlite, websockets and "
        "importlib.metadata are already imported only when first needed, so what is left is "
        "doemu's own modules, uvicorn, click and uvloop. Recovery itself (the alarm scan) does "
        "not show. Tried and kept: the socket listens before the runtime is built, the garbage "
        "collector is paused until ready (then `gc.freeze()`), the alarm scan runs on the loop in "
        "chunks, `.pyc` files are compiled before measuring; each binding kind's modules (KV, "
        "D1, R2, queues, workflows, assets, services) are imported only for a Worker that has "
        "one, the inspection commands are declared on demand, `html`, `difflib` and "
        "`sysconfig` wait for their first use (442 → 401 modules; the serving imports 807 → 697 "
        "M instructions under callgrind). The floor under the rest: the interpreter (91 M "
        "instructions, about 25 ms) and the libraries the server runs on, asyncio (with ssl), "
        "uvloop, sqlite3, click, tomllib and uvicorn with httptools (461 M together, two "
        "thirds of the import path; uvicorn's package init alone brings its CLI, its reload "
        "supervisors with watchfiles, anyio and multiprocessing, and logging.config). doemu's "
        "own modules are the other third, a good part of it dataclass creation (about 0.3–0.5 "
        "ms per class at import in Python 3.11, 17 classes in the config alone). Tried and "
        "rejected: a hand-written argument parser instead of click and bypassing uvicorn's "
        "config object (about 20 ms together, at the cost of two home-made copies of well-kept "
        "libraries). What would close the rest: a resident parent process that forks a "
        "pre-imported server on restart, or a start-up that imports only the storage layer "
        "before the first request."
    ),
    "start_ready": (
        "a fresh start is the restart row's path without state to open: interpreter start-up "
        "and the imports of the serving process, then the first request constructing one "
        "object; the restart row's profile and import-time split apply unchanged (see the "
        "restart target)."
    ),
    "stash_turn": (
        "each step of the fiber is `self.stash()` (the snapshot serialised with `json.dumps`, "
        "one `UPDATE cf_agents_runs` through the agent's SQL layer), one WebSocket frame and the "
        "end of the turn: a commit, and at power durability an fsync that the frame waits for "
        "(the output gate; one fsync covers every commit made while the previous one was in "
        "flight, so the fiber does not wait for each). The process column is the same without "
        "the fsyncs, the batch row the same stashes in one commit; the profile splits the "
        "serialisation, the statement, the commit and the frame."
    ),
    "chat_fanout": (
        "per chunk the agent's `model_reply` (agents/providers/loop.py) reads the provider's "
        "SSE through the `OpenAIChatCompletions` adapter (`post_sse`), turns the delta into a "
        "UI-message chunk, applies it to the assistant message (`AssistantMessage.consume`), "
        "stores it in the resumable stream (`ResumableStreams.store`, a flush every 10 chunks, "
        "each flush a commit that at power durability holds the following frames until its "
        "fsync) and broadcasts one frame to every connection (`_chat_broadcast`); per step the "
        "loop also writes its operation-ledger row and checkpoint. At the end the whole "
        "transcript is persisted and sent to the other clients. The lighter-path row (a "
        "hand-written SSE reader, no ledger, no checkpoint) shows what the model loop itself "
        "costs; the profile splits the turn between these."
    ),
    "chat_many": (
        "each chat is its own Durable Object, all on one event loop: per chunk the same path as "
        "the fan-out row (the adapter reading the provider's SSE, `AssistantMessage.consume`, "
        "the resumable stream's store and flush, one frame) but to one connection, and per turn "
        "each object's first-turn costs (the model loop's ledger row and checkpoint, the "
        "transcript persisted) a hundred times at once; the flushes' commits of the hundred "
        "objects at power durability share fsync batches. The first-chunk row shows how long "
        "the turn set-up takes under that load; the profile splits per-turn set-up from "
        "per-chunk work."
    ),
    "chat_replay": (
        "a reconnect is the WebSocket upgrade and the agent's connect (`cf_agent_stream_"
        "resuming`, identity, MCP frames), then on the ACK every stored chunk read back from "
        "SQLite and sent as its own frame (`ResumeHandshake`, `ResumableStreams`); the profile "
        "shows whether the read, the per-frame encoding or the sends dominate."
    ),
    "startup_ready": (
        "`doemu dev` reports ready before it releases the persisted alarms, and overdue alarms "
        "start at most 32 at a time, so ready waits only for the alarm table scan and the "
        "imports; if this row misses, the profile shows which of the two grew."
    ),
}
