"""Queues on Miniflare and on doemu: the same scenarios, the same client, the same observations.

Each test runs one scenario on both twins (:mod:`e2e.twins`): the JavaScript Worker
``e2e/miniflare/twins/queues.mjs`` on Miniflare (npm ``miniflare``, pinned in
``e2e/miniflare/package.json``: what ``wrangler dev`` runs) and its Python twin
``e2e/apps/queues_differential`` on a real ``doemu dev --clock manual``, both configured from that
app's ``wrangler.toml``. The consumer records every batch it receives; the test reduces those
records to what Cloudflare's documentation promises (how messages are grouped, what each delivery's
``attempts`` is, when retries and delays come back, where exhausted messages go, what body each
``contentType`` gives) and asserts that observation, the same on both sides. Where the two differ,
the test asserts each side's behaviour explicitly (so it fails if either changes), and the README's
Queues section names the difference.

The twins differ in language, not in scenario: Miniflare runs no Python queue consumer here, so
the JavaScript twin is the reference (a JS ``send()`` without ``contentType`` is ``v8``, a Python
one ``json``: both give the consumer the same object). Miniflare's queue broker runs on real
timers, so delays are small (a 0.25 s batch timeout, 1-2 s retry delays) and time is asserted as
lower bounds; on doemu the manual clock moves a tick between polls.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .twins import Twin, doemu_twin, miniflare_twin

HERE = Path(__file__).resolve().parent
APP = HERE / "apps" / "queues_differential"
SCRIPT = HERE / "miniflare" / "twins" / "queues.mjs"
RETRY_DELAY_MS = 1000  # the work and pairs queues' retry_delay


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Twin]]:
    work = tmp_path_factory.mktemp("queues-differential")
    with miniflare_twin(SCRIPT, APP / "wrangler.toml", work) as mf, doemu_twin(APP, work) as ours:
        yield {"miniflare": mf, "doemu": ours}


def deliveries(twin: Twin, queue: str) -> list[dict[str, Any]]:
    return [d for d in twin.get("/log")["deliveries"] if d["queue"] == queue]


def history(twin: Twin, queue: str, names: set[str]) -> dict[str, list[dict[str, Any]]]:
    """Per message (by its body's ``n``): each delivery ``{attempts, at, id, timestamp}``."""
    out: dict[str, list[dict[str, Any]]] = {}
    for batch in deliveries(twin, queue):
        for m in batch["messages"]:
            value = m["body"]["value"]
            if isinstance(value, dict) and value.get("n") in names:
                out.setdefault(value["n"], []).append({**m, "at": batch["at"]})
    return out


def gaps(seen: list[dict[str, Any]]) -> list[int]:
    return [b["at"] - a["at"] for a, b in itertools.pairwise(seen)]


def plans(*pairs: tuple[str, list[str]]) -> list[dict[str, Any]]:
    return [{"body": {"n": n, "plan": plan}} for n, plan in pairs]


def test_batches_fill_by_size_and_the_rest_waits_for_the_timeout(
    twins: dict[str, Twin],
) -> None:
    """``batches``: max_batch_size 3, max_batch_timeout 1 s. Seven messages sent at once come as
    two full batches at once and a batch of one after the timeout, in order, attempts 1."""

    def scenario(t: Twin) -> dict[str, Any]:
        messages = [{"body": {"n": i}} for i in range(7)]
        sent = t.post("/send", {"binding": "BATCHES", "batch": True, "messages": messages})["at"]
        got = t.settle(
            lambda: (
                (ds := deliveries(t, "batches")) and sum(len(d["messages"]) for d in ds) == 7 and ds
            ),
            what="seven messages delivered",
        )
        ids = [m["id"] for d in got for m in d["messages"]]
        return {
            "bodies": [[m["body"]["value"]["n"] for m in d["messages"]] for d in got],
            "attempts": {m["attempts"] for d in got for m in d["messages"]},
            "the last batch waited the timeout": got[-1]["at"] - sent >= 1000,
            "ids": len(set(ids)) == 7 and all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids),
        }

    seen = {name: scenario(t) for name, t in twins.items()}
    assert seen["miniflare"] == {
        "bodies": [[0, 1, 2], [3, 4, 5], [6]],
        "attempts": {1},
        "the last batch waited the timeout": True,
        "ids": True,
    }
    assert seen["doemu"] == seen["miniflare"]


def test_ack_retry_attempts_retry_delay_and_the_dead_letter_queue(twins: dict[str, Twin]) -> None:
    """``work``: max_retries 2, retry_delay 1 s, dead_letter_queue ``work-dlq``. Per message: an
    ack, the implicit ack of a handler that returns, ``retry()`` (back after retry_delay, with
    ``attempts`` 2), ``retry(delaySeconds=2)``, ``retry(delaySeconds=0)``, and a message retried on
    every attempt: delivered max_retries + 1 times, then moved to the dead-letter queue with its
    id and body (``attempts`` counting from 1 again there).

    One difference: the message in the dead-letter queue keeps its ``timestamp`` on Miniflare
    (its broker reuses the id and the timestamp on purpose); on doemu it is the time it moved."""
    names = {"A", "B", "C", "D", "E", "F"}

    def scenario(t: Twin) -> dict[str, Any]:
        messages = plans(
            ("A", ["ack"]),
            ("B", []),
            ("C", ["retry", "ack"]),
            ("D", ["retry:2", "none"]),
            ("E", ["retry", "retry", "retry"]),
            ("F", ["retry:0", "ack"]),
        )
        t.post("/send", {"binding": "WORK", "batch": True, "messages": messages})
        seen = t.settle(
            lambda: (
                (h := history(t, "work", names)).get("D", [])[1:]
                and history(t, "work-dlq", {"E"}).get("E")
                and h
            ),
            what="the retries done and E dead-lettered",
        )
        dead = history(t, "work-dlq", {"E"})["E"]
        return {
            "attempts": {n: [d["attempts"] for d in seen[n]] for n in sorted(seen)},
            "waited": {n: all(g >= w for g in gaps(seen[n])) for n, w in WAITS.items()},
            "dead letters": [d["attempts"] for d in dead],
            "same id": dead[0]["id"] == seen["E"][0]["id"],
            "same body": dead[0]["body"] == seen["E"][0]["body"],
            "same timestamp": dead[0]["timestamp"] == seen["E"][0]["timestamp"],
        }

    seen = {name: scenario(t) for name, t in twins.items()}
    common = {
        "attempts": {"A": [1], "B": [1], "C": [1, 2], "D": [1, 2], "E": [1, 2, 3], "F": [1, 2]},
        "waited": dict.fromkeys(WAITS, True),
        "dead letters": [1],
        "same id": True,
        "same body": True,
    }
    assert seen["miniflare"] == {**common, "same timestamp": True}
    assert seen["doemu"] == {**common, "same timestamp": False}


#: The least time between two deliveries of a message, by the plan it follows.
WAITS = {"C": RETRY_DELAY_MS, "D": 2000, "E": RETRY_DELAY_MS}


def test_ack_all_retry_all_and_what_an_explicit_ack_survives(twins: dict[str, Twin]) -> None:
    """``pairs``: max_batch_size 2, so each pair sent is one batch. ``retryAll()`` brings a batch
    back after retry_delay, ``retryAll(delaySeconds=2)`` after 2 s; ``ackAll()`` after a
    message's ``retry()`` leaves that retry in place.

    Where they differ, doemu follows Cloudflare's documented precedence ("the first call wins";
    a message acknowledged explicitly is not delivered again, even when the handler fails or the
    batch is retried): Miniflare's broker ignores explicit acks whenever the whole batch is
    retried, so an ``ack()`` followed by a throw (M/N) or by ``retryAll()`` (O/Q), and an
    ``ackAll()`` followed by a throw (R/S), are delivered again there. And a ``retry()`` with no
    delay in a batch that also calls ``retryAll(delaySeconds=0)`` (T/U) takes the batch's delay on
    Miniflare (T comes back with U at once), the consumer's retry_delay on doemu."""
    pairs = [
        ("G", ["retryAll", "ack"]), ("H", ["none", "none"]),
        ("I", ["retryAll:2", "none"]), ("J", ["none", "none"]),
        ("K", ["retry", "none"]), ("L", ["ackAll", "none"]),
        ("M", ["ack", "none"]), ("N", ["throw", "none"]),
        ("O", ["ack", "none"]), ("Q", ["retryAll", "none"]),
        ("R", ["ackAll", "none"]), ("S", ["throw", "none"]),
        ("T", ["retry", "none"]), ("U", ["retryAll:0", "none"]),
    ]  # fmt: skip
    names = {n for n, _ in pairs}
    twice = {"G", "H", "I", "J", "K", "N", "Q", "T", "U"}

    def scenario(t: Twin) -> dict[str, Any]:
        t.post("/send", {"binding": "PAIRS", "batch": True, "messages": plans(*pairs)})
        seen = t.settle(
            lambda: (
                (h := history(t, "pairs", names)).keys() == names
                and all(len(h[n]) >= 2 for n in twice)
                and h
            ),
            what="every pair delivered and its retries back",
        )
        second = {n: d[1]["at"] for n, d in seen.items() if len(d) > 1}
        return {
            "attempts": {n: [d["attempts"] for d in seen[n]] for n in sorted(seen)},
            "waited": {
                n: all(g >= w for g in gaps(seen[n]))
                for n, w in {"G": 1000, "H": 1000, "I": 2000, "J": 2000, "K": 1000}.items()
            },
            "T came back with U": second["T"] == second["U"],
        }

    seen = {name: scenario(t) for name, t in twins.items()}
    common = {n: [1, 2] for n in twice} | {"L": [1]}
    waited = dict.fromkeys("GHIJK", True)
    kept_acks = {"M": [1], "O": [1], "R": [1], "S": [1]}
    assert seen["doemu"] == {
        "attempts": dict(sorted((common | kept_acks).items())),
        "waited": waited,
        "T came back with U": False,
    }
    assert seen["miniflare"] == {
        "attempts": dict(sorted((common | {n: [1, 2] for n in kept_acks}).items())),
        "waited": waited,
        "T came back with U": True,
    }


def test_delay_seconds_on_send_and_send_batch(twins: dict[str, Twin]) -> None:
    """``delaySeconds`` holds a message back: on ``send``, on ``sendBatch`` as a whole, and per
    message in a batch (which wins over the batch's); a message's ``timestamp`` is when it was
    sent, so it waited at least its delay by its delivery."""
    delays = {"d0": 0, "d1": 1, "d1b": 1, "d2": 2}

    def scenario(t: Twin) -> dict[str, Any]:
        t.post("/send", {"binding": "WORK", "messages": [{"body": {"n": "d0"}}]})
        t.post("/send", {"binding": "WORK", "messages": [{"body": {"n": "d1"}, "delaySeconds": 1}]})
        batch = [{"body": {"n": "d2"}}, {"body": {"n": "d1b"}, "delaySeconds": 1}]
        t.post("/send", {"binding": "WORK", "batch": True, "delaySeconds": 2, "messages": batch})
        seen = t.settle(
            lambda: (h := history(t, "work", set(delays))).keys() == delays.keys() and h,
            what="the delayed messages delivered",
        )
        return {
            "attempts": {n: [d["attempts"] for d in seen[n]] for n in sorted(seen)},
            "waited": {
                n: seen[n][0]["at"] - seen[n][0]["timestamp"] >= s * 1000 for n, s in delays.items()
            },
            "order": sorted(delays, key=lambda n: (seen[n][0]["at"], delays[n])),
        }

    seen = {name: scenario(t) for name, t in twins.items()}
    assert seen["miniflare"] == {
        "attempts": {"d0": [1], "d1": [1], "d1b": [1], "d2": [1]},
        "waited": dict.fromkeys(delays, True),
        "order": ["d0", "d1", "d1b", "d2"],
    }
    assert seen["doemu"] == seen["miniflare"]


def test_content_types_give_the_consumer_text_bytes_and_json(twins: dict[str, Twin]) -> None:
    """Each ``contentType`` gives the consumer its body back: ``text`` a string, ``bytes`` the
    bytes (an ``ArrayBuffer`` in JS, a ``memoryview`` in Python), ``json`` the value (a string
    stays a string), ``v8`` the value; with none, an object arrives as the object (the default is
    ``v8`` in JS and ``json`` in Python, which agree on such a body)."""
    sent = [
        ({"body": "hi", "contentType": "text"}, {"kind": "text", "value": "hi"}),
        ({"body": {"$bytes": [0, 1, 255]}, "contentType": "bytes"},
         {"kind": "bytes", "value": [0, 1, 255]}),
        ({"body": {"a": [1, "x"], "b": None}, "contentType": "json"},
         {"kind": "json", "value": {"a": [1, "x"], "b": None}}),
        ({"body": "just text", "contentType": "json"}, {"kind": "text", "value": "just text"}),
        ({"body": 7, "contentType": "json"}, {"kind": "json", "value": 7}),
        ({"body": {"v": [1, 2]}, "contentType": "v8"}, {"kind": "json", "value": {"v": [1, 2]}}),
        ({"body": {"d": True}}, {"kind": "json", "value": {"d": True}}),
    ]  # fmt: skip

    def scenario(t: Twin) -> list[Any]:
        for message, _ in sent:
            t.post("/send", {"binding": "TYPES", "messages": [message]})
        got = t.settle(
            lambda: (
                len(ms := [m for d in deliveries(t, "types") for m in d["messages"]]) == len(sent)
                and ms
            ),
            what="every body delivered",
        )
        return [m["body"] for m in got]

    seen = {name: scenario(t) for name, t in twins.items()}
    assert seen["miniflare"] == [body for _, body in sent]
    assert seen["doemu"] == seen["miniflare"]
