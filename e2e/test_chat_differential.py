"""The same chat scenarios through Cloudflare's JavaScript ``AIChatAgent`` and the Python one.

JavaScript: ``e2e/js_chat/worker.src.mjs`` — npm ``@cloudflare/ai-chat`` 0.12.2 answering with the
AI SDK's ``streamText`` over ``@ai-sdk/openai-compatible``, bundled with esbuild and served by the
pinned ``workerd``. Python: ``e2e/apps/chat_differential`` on a real ``doemu dev``, both documented
ways (``model_reply`` over ``OpenAIChatCompletions``; ``ui_message_response(text_stream(...))``).
One :class:`~doemu.testing.fake_providers.FakeLLM` is the OpenAI-compatible provider behind all
three, and the client is Cloudflare's ``useAgentChat`` rendered headless
(``e2e/js_chat/client.mjs``).

Each scenario runs once per agent. The frames every socket carried (both directions, in order),
``/get-messages`` and the provider requests are compared after normalising only what must
differ: ids (each distinct one named by its first appearance) and timestamps. A resumed stream
is compared as its chunks, since how many are replayed rather than live depends on timing. What
still differs is asserted as the docs' "Differences from the JavaScript AIChatAgent" (and "...
approvals") name it, so a change on either side fails here.

The approval scenarios (``approved``, ``denied``) give a server tool that needs a person's
approval (``needsApproval`` / ``needs_approval``) to the model: the client answers the
``tool-approval-request`` with the hook's ``addToolApprovalResponse`` and the id the server sent;
the tool runs once (approved: counted by a counter server outside both agents) or never
(denied), and the turn continues. Each run checks that the id round-trips (the chunk's
``approvalId`` is what the hook answered with, the server took the answer and stored the
decision under that id) before the two runs are compared. ``text_stream`` has no tools, so
these run on ``model_reply`` only.

Skipped, with the reason, when ``node``/``npm`` are missing, unless ``DOEMU_E2E_REQUIRE_NODE=1``.
Set ``DOEMU_DIFF_DUMP=<dir>`` to write every normalised run there as JSON.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from doemu.testing.devserver import DevServer, port_is_open
from doemu.testing.fake_providers import CounterServer, FakeLLM, Reply, Text, ToolUse
from tests.polling import eventually_sync

ROOT = Path(__file__).resolve().parent.parent
JS = Path(__file__).resolve().parent / "js_chat"
APP = Path(__file__).resolve().parent / "apps" / "chat_differential"
WORDS = [f"w{i} " for i in range(24)]  # 2.4 s at 100 ms: still live when B mounts
#: The in-band error text of streamText's default onError (toUIMessageStreamResponse).
MASKED = "An error occurred."
ASSISTANT_ID = re.compile(r"^assistant_\d{13}_[0-9a-z]{9}$")


# -- the JavaScript side ---------------------------------------------------------------------------
def _installed(package: str) -> str | None:
    manifest = JS / "node_modules" / package / "package.json"
    return str(json.loads(manifest.read_text())["version"]) if manifest.exists() else None


@pytest.fixture(scope="module")
def js_project() -> Path:
    """``e2e/js_chat`` with its locked dependencies (``npm ci`` when they are missing)."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        if os.environ.get("DOEMU_E2E_REQUIRE_NODE") == "1":
            pytest.fail("node/npm are not installed and DOEMU_E2E_REQUIRE_NODE=1")
        pytest.skip("node/npm are not installed; the JavaScript AIChatAgent side needs them")
    wanted = json.loads((JS / "package.json").read_text())["dependencies"]
    if any(_installed(p) != wanted[p] for p in ("@cloudflare/ai-chat", "workerd", "esbuild")):
        done = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=JS,
                              capture_output=True, text=True, timeout=600)  # fmt: skip
        assert done.returncode == 0, f"npm ci failed:\n{done.stdout}\n{done.stderr}"
    return JS


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(api_key="test-key") as server:
        yield server


@pytest.fixture(scope="module")
def counter() -> Iterator[CounterServer]:
    """The approval scenarios' side effect, counted outside both agents (no key collapses)."""
    with CounterServer(honour_idempotency=False) as plain:
        yield plain


@pytest.fixture(scope="module")
def workerd(
    js_project: Path, llm: FakeLLM, counter: CounterServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The JavaScript agent on workerd; its ``host:port``."""
    build = tmp_path_factory.mktemp("js_chat")
    stubs = str(js_project / "stubs.mjs")
    bundled = subprocess.run(
        [str(js_project / "node_modules" / ".bin" / "esbuild"), "worker.src.mjs", "--bundle",
         "--format=esm", "--platform=neutral", "--main-fields=module,main",
         "--conditions=workerd,worker,import,default", "--external:cloudflare:workers",
         "--external:node:*", f"--alias:cloudflare:email={stubs}", f"--alias:@vercel/oidc={stubs}",
         f"--alias:pkce-challenge={stubs}", "--alias:fs=node:fs", "--alias:os=node:os",
         "--alias:path=node:path", "--log-level=error", f"--outfile={build / 'worker.mjs'}"],
        cwd=js_project, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bundled.returncode == 0, f"esbuild failed:\n{bundled.stderr}"
    shutil.copy(js_project / "workerd.capnp", build / "workerd.capnp")
    (build / "state").mkdir()
    port = _free_port()
    binary = js_project / "node_modules" / "@cloudflare" / "workerd-linux-64" / "bin" / "workerd"
    env = {**os.environ, "PROVIDER_URL": f"{llm.url}/v1", "PROVIDER_KEY": llm.api_key,
           "COUNTER_URL": counter.url}  # fmt: skip
    log = (build / "workerd.log").open("w")
    proc = subprocess.Popen(
        [str(binary), "serve", "--experimental", "--socket-addr", f"http=127.0.0.1:{port}",
         "--directory-path", f"state={build / 'state'}", str(build / "workerd.capnp")],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        eventually_sync(lambda: port_is_open("127.0.0.1", port), within=30, what="workerd")
        yield f"127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, 9)
        proc.wait(timeout=10)
        log.close()


# -- the Python side -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def doemu(
    llm: FakeLLM, counter: CounterServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DevServer]:
    base = tmp_path_factory.mktemp("chat_differential")
    project = base / "app"
    shutil.copytree(APP, project, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    (project / ".dev.vars").write_text(
        f"OPENAI_API_KEY={llm.api_key}\nOPENAI_BASE_URL={llm.url}/v1\nCOUNTER_URL={counter.url}\n"
    )
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    server = DevServer(project, base / "state", env={"PYTHONPATH": pythonpath}).start()
    try:
        yield server
    finally:
        server.kill()


# -- scenarios -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scenario:
    name: str
    replies: Callable[[], list[Reply]]
    until: str = "done"
    watched: bool = False  # the agents with a 1 s stall watchdog and max_attempts 3
    resume: bool = False  # the client reloads mid-reply and resumes
    agent: str | None = None  # one class on every side (and no text_stream side)

    def __str__(self) -> str:
        return self.name


def _refund_replies() -> list[Reply]:
    """A ``refund`` call, then the words after it: 0.4 s of them, so the package's continuation
    still streams when the tab that answered acknowledges it (finished before, the tab would
    get none of its chunks: see :func:`approval_differences`)."""
    return [Reply(Text("refunding"), ToolUse("refund", {"amount": 7}, id="rf1")),
            Reply(Text("do", "ne"), delay_ms=200)]  # fmt: skip


SCENARIOS = [
    Scenario("plain", lambda: [Reply(Text("Hello ", "world"))]),
    Scenario("resumed", lambda: [Reply(Text(*WORDS), delay_ms=100)], resume=True),
    Scenario(
        "stall",
        lambda: [Reply(Text("one ", "two "), stall_after=1), Reply(Text("two"))],
        until="recovered",
        watched=True,
    ),
    Scenario(
        "exhaustion",
        lambda: [Reply(Text("one ", "two "), stall_after=1)] * 4,
        until="terminal",
        watched=True,
    ),
    Scenario(
        "dropped",
        lambda: [Reply(Text("one ", "two ", "three ", "four"), die_after=3), Reply(Text("four"))],
        until="recovered",
    ),
    Scenario("http_500", lambda: [Reply(fail=(500, "the model is down"))] * 3),
    Scenario("http_429", lambda: [Reply(fail=(429, "slow down"), retry_after=1)] * 3),
    Scenario("approved", lambda: _refund_replies(), until="approve", agent="ApprovalChat"),
    Scenario("denied", lambda: _refund_replies(), until="deny", agent="ApprovalChat"),
]
SIDES = {"js": ("DiffChat", "WatchedChat"), "model_reply": ("ModelChat", "WatchedModelChat"),
         "text_stream": ("StreamChat", "WatchedStreamChat")}  # fmt: skip


@dataclass
class Run:
    report: dict[str, Any]
    requests: list[Any]  # each chat-completions request's messages
    statuses: list[str]  # each generation's status on the provider
    side_effects: int  # requests the approval scenarios' tool sent the counter


def run(
    host: str, side: str, scenario: Scenario, llm: FakeLLM, counter: CounterServer, js_project: Path
) -> Run:
    llm.reset()
    counter.reset()
    llm.script(*scenario.replies())
    agent = scenario.agent or SIDES[side][scenario.watched]
    name = f"{scenario.name}-{uuid.uuid4().hex[:8]}"
    mode = "resume" if scenario.resume else "turn"
    done = subprocess.run(["node", "client.mjs", host, agent, name, mode, "hi", scenario.until],
                          cwd=js_project, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, f"{side} {scenario}: the client failed:\n{done.stderr}"
    report = json.loads(done.stdout)
    stats = llm.stats
    return Run(report, [r["messages"] for r in llm.requests("chat")],
               [g.status for g in stats.generations], counter.calls)  # fmt: skip


# -- normalising -----------------------------------------------------------------------------------
ID_KEYS = frozenset({"id", "messageId", "probeId", "requestId", "approvalId"})
TIME_KEYS = frozenset({"createdAt", "timestamp", "at"})
#: Chunks whose ``id`` is the part's id (``txt-0``): compared literally, never renamed.
PART_CHUNKS = ("text-", "reasoning-")


class Names:
    """Every distinct id, named by its first appearance — ``id0``, ``id1``… — keeping the shape
    of an assistant message id (``assistant_<ms>_<9 base-36 chars>`` → ``assistant_2``)."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def __call__(self, value: str) -> str:
        shape = "assistant_" if ASSISTANT_ID.match(value) else "id"
        return self.names.setdefault(value, f"{shape}{len(self.names)}")


def normal(value: Any, names: Names) -> Any:
    if isinstance(value, dict):
        literal = str(value.get("type", "")).startswith(PART_CHUNKS)
        out = {}
        for key, item in value.items():
            if key in TIME_KEYS:
                out[key] = "<time>"
            elif key in ID_KEYS and isinstance(item, str) and not literal:
                out[key] = names(item)
            elif key == "messageIds" and isinstance(item, list):
                out[key] = [names(str(i)) for i in item]
            elif key == "body" and isinstance(item, str) and item.startswith("{"):
                out[key] = normal(json.loads(item), names)  # a chunk or a request, parsed
            elif value.get("type") == "cf_agent_identity" and key in ("name", "agent"):
                out[key] = f"<{key}>"  # the instance and the class differ by design
            else:
                out[key] = normal(item, names)
        return out
    if isinstance(value, list):
        return [normal(item, names) for item in value]
    return value


def normalised(result: Run) -> dict[str, Any]:
    """What is compared: each client's frames, the transcript, the provider's requests and
    generations. (The hook's own messages and statuses are left out: they are what React had
    rendered when the client stopped, which depends on timing even when the frames agree.)"""
    names = Names()
    clients = {
        label: {"frames": [[f["dir"], normal(f["frame"], names)] for f in c["frames"]]}
        for label, c in result.report["clients"].items()
    }
    return {
        "clients": clients,
        "getMessages": normal(result.report["getMessages"], names),
        "requests": result.requests,
        "generations": result.statuses,
    }


def resumed_view(frames: list[list[Any]]) -> list[list[Any]]:
    """B's frames with the replayed/live split taken out: ``replay`` flags dropped and the
    ``replayComplete`` marker frame removed (checked for order separately)."""
    out = []
    for direction, frame in frames:
        if isinstance(frame, dict) and frame.get("replayComplete"):
            continue
        out.append([direction, {k: v for k, v in frame.items() if k != "replay"}])
    return out


def replay_in_order(frames: list[list[Any]]) -> bool:
    """Replayed chunks, then the ``replayComplete`` marker, then live chunks."""
    marks = [
        "complete" if f.get("replayComplete") else "replay" if f.get("replay") else "live"
        for d, f in frames
        if d == "in" and isinstance(f, dict) and f.get("type") == "cf_agent_use_chat_response"
    ]
    return marks.count("complete") == 1 and marks == sorted(marks, key=["replay", "complete",
                                                                         "live"].index)  # fmt: skip


# -- the named differences -------------------------------------------------------------------------
def masked(view: dict[str, Any]) -> dict[str, Any]:
    """The Python agent's in-band provider error as streamText's default ``onError`` words it."""
    text = json.dumps(view)
    for run_text in set(_errors(view)):
        text = text.replace(json.dumps(run_text), json.dumps(MASKED))
    return dict(json.loads(text))


def _errors(view: dict[str, Any]) -> list[str]:
    return [
        f["body"]
        for c in view["clients"].values()
        for d, f in c["frames"]
        if d == "in" and isinstance(f, dict) and f.get("error") and not f.get("done")
    ]


# -- approvals -------------------------------------------------------------------------------------
#: streamText's approval ids: its id generator's ``aitxt`` prefix and 24 random characters.
AITXT = re.compile(r"^aitxt-[0-9A-Za-z]{24}$")
#: How the published hook (``ai`` 6.0.325 inside ``@ai-sdk/react`` 3.0.328) meets the package's
#: replayed continuation: its resumed stream starts from an empty message, so the approved
#: call's ``tool-output-available`` finds no part.
NO_PART = 'No tool invocation found for tool call ID "rf1".'
#: What the model reads for a denied call (no reason given): doemu's model loop, and the AI SDK's
#: OpenAI-compatible provider.
DOEMU_DENIED, SDK_DENIED = "The user denied this tool call.", "Tool call execution denied."
#: The frames of the answering tab's resume handshake for the continuation, either way.
HANDSHAKE = ("cf_agent_stream_pending", "cf_agent_stream_resuming", "cf_agent_stream_resume_ack",
             "cf_agent_stream_resume_none")  # fmt: skip


def _chunks(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The UI-message chunks the tab received, parsed, in order (replays included)."""
    out = []
    for f in report["clients"]["A"]["frames"]:
        frame = f["frame"]
        if f["dir"] == "in" and isinstance(frame, dict) and frame.get("body"):
            out.append(json.loads(frame["body"]))
    return out


def check_round_trip(side: str, result: Run, approved: bool) -> None:
    """The approval id the server sent is the one the hook answered with, the answer reached
    the server as the call's ``cf_agent_tool_approval``, and the server stored the decision
    under that id. Then what each side's id looks like (a named difference)."""
    asks = [c for c in _chunks(result.report) if c["type"] == "tool-approval-request"]
    assert len(asks) == 1, (side, asks)
    ask, answer = asks[0], result.report["answer"]
    assert (answer["approvalId"], answer["toolCallId"]) == (ask["approvalId"], ask["toolCallId"])
    frames = result.report["clients"]["A"]["frames"]
    sent = [f["frame"] for f in frames if f["dir"] == "out"
            and f["frame"].get("type") == "cf_agent_tool_approval"]  # fmt: skip
    assert sent == [{"type": "cf_agent_tool_approval", "toolCallId": ask["toolCallId"],
                     "approved": approved, "autoContinue": True}], side  # fmt: skip
    stored = [p for m in result.report["getMessages"]["body"] for p in m["parts"]
              if p.get("toolCallId") == ask["toolCallId"]]  # fmt: skip
    assert [p["approval"] for p in stored] == [{"id": ask["approvalId"], "approved": approved}]
    assert stored[0]["state"] == ("output-available" if approved else "output-denied")
    if side == "js":
        assert AITXT.match(ask["approvalId"]), ask
    else:
        assert ask["approvalId"] == ask["toolCallId"], ask


def without_ledger(value: Any) -> Any:
    """``value`` without the model loop's ledger metadata (``providerMetadata.agents`` on a tool
    call's chunk, ``callProviderMetadata.agents`` on its stored part)."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in ("providerMetadata", "callProviderMetadata") and isinstance(item, dict):
                item = {k: v for k, v in item.items() if k != "agents"}
                if not item:
                    continue
            out[key] = without_ledger(item)
        return out
    if isinstance(value, list):
        return [without_ledger(item) for item in value]
    return value


def compact_json(requests: Any) -> Any:
    """The provider requests with the JSON text inside them (a call's ``arguments``, a tool
    message's ``content``) written compact, as the AI SDK's ``JSON.stringify`` writes it."""
    if isinstance(requests, list):
        return [compact_json(item) for item in requests]
    if not isinstance(requests, dict):
        return requests
    out = {}
    for key, item in requests.items():
        if key in ("arguments", "content") and isinstance(item, str) and item[:1] in "{[":
            item = json.dumps(json.loads(item), separators=(",", ":"), ensure_ascii=False)
        out[key] = compact_json(item)
    return out


def whole_tool_calls(frames: list[list[Any]]) -> list[list[Any]]:
    """streamText's tool-call chunks as model_reply sends them: no ``tool-input-delta``, and the
    text part closed before the call starts; each stream's ``seq`` renumbered to match."""
    out: list[list[Any]] = []
    for direction, frame in frames:
        body = frame.get("body") if isinstance(frame, dict) else None
        kind = body.get("type") if isinstance(body, dict) else None
        if kind == "tool-input-delta":
            continue
        if kind == "text-end":
            starts = [i for i, (_, f) in enumerate(out) if _body_type(f) == "text-start"]
            calls = [i for i, (_, f) in enumerate(out) if _body_type(f) == "tool-input-start"
                     and starts and i > starts[-1]]  # fmt: skip
            if calls:
                out.insert(calls[0], [direction, frame])
                continue
        out.append([direction, frame])
    seqs: dict[str, int] = {}
    for _, frame in out:
        if isinstance(frame, dict) and "seq" in frame:
            frame["seq"] = seqs.setdefault(frame["id"], 0)
            seqs[frame["id"]] += 1
    return out


def _body_type(frame: Any) -> Any:
    body = frame.get("body") if isinstance(frame, dict) else None
    return body.get("type") if isinstance(body, dict) else None


def _answered_at(frames: list[list[Any]]) -> int:
    """The index of the tab's ``cf_agent_tool_approval`` in its (normalised) frames."""
    return next(i for i, (d, f) in enumerate(frames)
                if d == "out" and f.get("type") == "cf_agent_tool_approval")  # fmt: skip


def without_continuation_handshake(frames: list[list[Any]]) -> list[list[Any]]:
    """The frames after the approval without the continuation's resume handshake (the package:
    ``stream_pending``, ``stream_resuming``, the ACK and a replay; doemu: ``resume_none``, then
    live): the continuation's chunks compared as chunks, as a resumed stream's are."""
    answered = _answered_at(frames)
    after = [[d, f] for d, f in frames[answered:] if f.get("type") not in HANDSHAKE]
    return frames[:answered] + resumed_view(after)


def approval_differences(side: str, result: Run, view: dict[str, Any]) -> dict[str, Any]:
    """Assert the named differences of the approval scenarios on ``side``'s run, and return
    its view with them normalised (docs/chat.md, "Approvals, frame for frame")."""
    approved = result.report["answer"]["hook"]["part"]["approval"]["approved"]
    chunks = _chunks(result.report)
    frames = view["clients"]["A"]["frames"]
    answered = _answered_at(frames)
    kinds = [f.get("type") for d, f in frames[answered:] if d == "in"]  # after the answer
    hook = result.report["answer"]["hook"]
    ledger = [c for c in chunks if c["type"] == "tool-input-available"]
    deltas = [c for c in chunks if c["type"] == "tool-input-delta"]
    if side == "js":
        # The package announces the continuation to the tab that answered (after parking its
        # probe with stream_pending if it came first) and replays it after the ACK...
        assert "cf_agent_stream_resuming" in kinds and "cf_agent_stream_resume_none" not in kinds
        assert any(c.get("delta") == "ne" for c in chunks), "the continuation ended before the ACK"
        # ...which the published hook fails to apply to an approved call (status error, the
        # part left approval-responded); a denied call has no chunk in it, and renders.
        if approved:
            assert (hook["status"], hook["error"]) == ("error", NO_PART), hook
            assert hook["part"]["state"] == "approval-responded"
        else:
            assert (hook["status"], hook["part"]["state"]) == ("ready", "output-denied"), hook
        # streamText streams the call's arguments.
        assert deltas and not any("providerMetadata" in c for c in ledger)
        view["clients"]["A"]["frames"] = whole_tool_calls(view["clients"]["A"]["frames"])
    else:
        # doemu tells that tab's probe idle and streams the continuation to it live (it never
        # left the live frames): the hook renders it.
        assert "cf_agent_stream_resume_none" in kinds
        assert not {"cf_agent_stream_pending", "cf_agent_stream_resuming"} & set(kinds)
        settled = "output-available" if approved else "output-denied"
        assert (hook["status"], hook["part"]["state"]) == ("ready", settled), hook
        # model_reply sends a call whole, naming its ledger operation.
        assert not deltas and all(c["providerMetadata"]["agents"]["opId"] for c in ledger)
    view["clients"]["A"]["frames"] = without_continuation_handshake(view["clients"]["A"]["frames"])
    if side != "js":  # Python's default separators: the same JSON, a space more
        compact = compact_json(view["requests"])
        assert compact != view["requests"], view["requests"]
        # What the model reads for a denied call: doemu's words, where the AI SDK writes its own.
        tool_texts = [m["content"] for r in compact for m in r if m["role"] == "tool"]
        assert (DOEMU_DENIED in tool_texts) == (not approved), tool_texts
        view["requests"] = json.loads(json.dumps(compact).replace(DOEMU_DENIED, SDK_DENIED))
    return dict(without_ledger(view))


def dump(scenario: Scenario, side: str, view: dict[str, Any]) -> None:
    target = os.environ.get("DOEMU_DIFF_DUMP")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        (Path(target) / f"{scenario}-{side}.json").write_text(json.dumps(view, indent=1))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
def test_the_python_agent_frames_a_chat_as_the_javascript_one(
    scenario: Scenario,
    workerd: str,
    doemu: DevServer,
    llm: FakeLLM,
    counter: CounterServer,
    js_project: Path,
) -> None:
    python = f"{doemu.host}:{doemu.port}"
    runs = {
        "js": run(workerd, "js", scenario, llm, counter, js_project),
        "model_reply": run(python, "model_reply", scenario, llm, counter, js_project),
    }
    if scenario.agent is None:  # text_stream is your own model call: no tools
        runs["text_stream"] = run(python, "text_stream", scenario, llm, counter, js_project)
    views = {side: normalised(result) for side, result in runs.items()}
    for side, view in views.items():
        dump(scenario, side, view)
    if scenario.until in ("approve", "deny"):
        approved = scenario.until == "approve"
        # The refund ran once when approved, never when denied, on every side (counted outside).
        assert {side: r.side_effects for side, r in runs.items()} == dict.fromkeys(
            runs, int(approved)
        )
        for side, result in runs.items():
            check_round_trip(side, result, approved)
            views[side] = approval_differences(side, result, views[side])
            dump(scenario, f"{side}-compared", views[side])
    if scenario.resume:
        for view in views.values():
            assert replay_in_order(view["clients"]["B"]["frames"]), view["clients"]["B"]
            view["clients"]["B"]["frames"] = resumed_view(view["clients"]["B"]["frames"])
            del view["clients"]["A"]  # A's share of the reply depends on timing alone
    reference = views.pop("js")
    for side, view in views.items():
        expected = reference
        if scenario.name.startswith("http_"):
            # Difference 1: the provider's words in-band, where streamText's onError masks them.
            assert _errors(view) and _errors(reference) == [MASKED]
            view = masked(view)
            # Difference 2: streamText retried the refused request twice itself.
            assert reference["requests"] == view["requests"] * 3
            assert reference["generations"] == view["generations"] * 3 == ["failed"] * 3
            expected = {**expected, "requests": view["requests"],
                        "generations": view["generations"]}  # fmt: skip
        if scenario.watched:
            # Difference 3: the watchdog closes a stalled request; the package leaves it open.
            stalled = [i for i, s in enumerate(view["generations"]) if s == "incomplete"]
            assert stalled and all(reference["generations"][i] == "in_progress" for i in stalled)
            expected = {**expected, "generations": view["generations"]}
        assert view == expected, side
    assert "Traceback" not in doemu.output
