"""Workflows on Miniflare and on doemu: the same scenarios, the same client, the same observations.

Each test runs one scenario on both twins (:mod:`e2e.twins`): the JavaScript workflow
``e2e/miniflare/twins/workflows.mjs`` on Miniflare (npm ``miniflare``, pinned in
``e2e/miniflare/package.json``; its Workflows engine is Cloudflare's ``workflows-shared``) and
its Python twin ``e2e/apps/workflows_differential`` (a ``WorkflowEntrypoint``) on a real
``doemu dev --clock manual``. Miniflare cannot run a Python workflow, so the JavaScript twin is
the reference: where the two differ only because one is JavaScript and the other Python (how an
error reaches ``run()``), the test names it as such. Every step records its side effects
(``GET /effects``), so a step that ran twice shows twice, whatever the engine claims.

Miniflare's engine waits on real timers (sleeps, retry delays, event timeouts), so delays are
100-3000 ms and time is asserted as lower bounds; on doemu the manual clock moves a tick between
polls, and the gaps are exact. ``queued`` and ``waitingForPause`` are not asserted: on both sides
they last only until the engine picks the instance up, so no client can observe them reliably.

Differences, each asserted per side and named in the README's Workflows section: a sleeping or
event-waiting instance is ``waiting`` on doemu (as Cloudflare documents), ``running`` on
Miniflare; doemu replays ``run()`` from the top on every wake-up (after a sleep, a retry delay, an
event), Miniflare keeps one run in memory and replays only on ``resume``/``restart``; ``create``
with a taken id fails on doemu (as on Cloudflare) and answers the existing instance on Miniflare.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .twins import Twin, doemu_twin, miniflare_twin

HERE = Path(__file__).resolve().parent
APP = HERE / "apps" / "workflows_differential"
SCRIPT = HERE / "miniflare" / "twins" / "workflows.mjs"
#: What status() says while an instance sleeps or waits for an event.
WAITING = {"miniflare": "running", "doemu": "waiting"}


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Twin]]:
    work = tmp_path_factory.mktemp("workflows-differential")
    with miniflare_twin(SCRIPT, APP / "wrangler.toml", work) as mf, doemu_twin(APP, work) as ours:
        yield {"miniflare": mf, "doemu": ours}


def status(t: Twin, instance: str) -> dict[str, Any]:
    answer: dict[str, Any] = t.get("/status", id=instance)
    return answer


def effects(t: Twin, instance: str) -> list[str]:
    return [e["what"] for e in t.get("/effects", id=instance)]


def times(t: Twin, instance: str, what: str) -> list[int]:
    return [e["at"] for e in t.get("/effects", id=instance) if e["what"] == what]


def until_status(t: Twin, instance: str, wanted: str, **kw: Any) -> dict[str, Any]:
    return t.settle(
        lambda: (s := status(t, instance))["status"] == wanted and s,
        what=f"{instance} {wanted}",
        **kw,
    )


def control(t: Twin, instance: str, action: str) -> Any:
    return t.post("/control", {"id": instance, "action": action})


def test_a_completed_step_never_runs_again_across_sleep_pause_and_resume(
    twins: dict[str, Twin],
) -> None:
    """Step ``a``, a 3 s ``sleep``, step ``b``. Paused during the sleep and resumed, the
    instance replays ``run()`` from the top: ``a`` answers from its stored result (its side
    effect stays at one), the sleep ends no sooner than 3 s after it began, ``b`` runs once,
    and the output is ``{a: 1, b: 2}``.

    Differences: during the sleep the status is ``waiting`` on doemu, ``running`` on Miniflare;
    ``run()`` started twice on Miniflare (the first run, and the replay after ``resume``) and
    three times on doemu (which also replays when the sleep ends)."""

    def scenario(t: Twin) -> dict[str, Any]:
        t.post("/create", {"id": "cache-1", "params": {"kind": "cache", "nap": 3000}})
        t.settle(lambda: "a" in effects(t, "cache-1"), what="step a ran", tick_ms=0)
        slept = until_status(t, "cache-1", WAITING[t.name], tick_ms=0)["status"]
        assert control(t, "cache-1", "pause") == {"ok": True}
        paused = until_status(t, "cache-1", "paused", tick_ms=0)["status"]
        assert control(t, "cache-1", "resume") == {"ok": True}
        final = until_status(t, "cache-1", "complete")
        done = effects(t, "cache-1")
        (a,), (b,) = times(t, "cache-1", "a"), times(t, "cache-1", "b")
        return {
            "while sleeping": slept,
            "after pause": paused,
            "final": final,
            "steps": [e for e in done if e != "run"],
            "runs": done.count("run"),
            "slept the whole nap": b - a >= 3000,
        }

    seen = {name: scenario(t) for name, t in twins.items()}
    common = {
        "after pause": "paused",
        "final": {"status": "complete", "output": {"a": 1, "b": 2}, "error": None},
        "steps": ["a", "b"],
        "slept the whole nap": True,
    }
    assert seen["miniflare"] == {**common, "while sleeping": "running", "runs": 2}
    assert seen["doemu"] == {**common, "while sleeping": "waiting", "runs": 3}


def test_retries_follow_limit_delay_and_backoff_and_non_retryable_errors_stop_them(
    twins: dict[str, Twin],
) -> None:
    """Three steps fail on their first three attempts with ``retries={limit: 3, delay: 100}``
    and succeed on the fourth: the waits between attempts are at least 100/100/100 ms
    (constant), 100/200/300 (linear), 100/200/400 (exponential), exact on doemu's clock. A step
    with ``limit: 1`` fails twice and ``run()`` catches its last error; a ``NonRetryableError``
    fails its step on the first attempt, whatever the limit. Completed steps never ran again.

    How the caught errors read differs by language, not by engine: the JavaScript ``run()`` sees
    the step's ``Error`` (and ``"NonRetryableError: …"``); the Python one sees what the Python
    SDK makes of them (a ``PythonError`` whose traceback ends with the error, and the
    ``NonRetryableError`` again)."""
    expected = {"constant": [100, 100, 100], "linear": [100, 200, 300],
                "exponential": [100, 200, 400]}  # fmt: skip

    def scenario(t: Twin) -> dict[str, Any]:
        t.post("/create", {"id": "retries-1", "params": {"kind": "retries", "delay": 100}})
        final = until_status(t, "retries-1", "complete", within=30)
        done = [e for e in effects(t, "retries-1") if e != "run"]
        gaps = {
            b: [y - x for x, y in itertools.pairwise(times(t, "retries-1", f"flaky-{b}"))]
            for b in expected
        }
        output = final["output"]
        return {
            "attempts": {name: done.count(name) for name in dict.fromkeys(done)},
            "results": [output[b] for b in expected],
            "waited": {
                b: all(g >= w for g, w in zip(gaps[b], expected[b], strict=True)) for b in expected
            },
            "doomed": output["doomed"].rstrip().endswith("doomed on attempt 2"),
            "refused": output["refused"],
            "exact gaps": gaps == expected,
        }

    seen = {name: scenario(t) for name, t in twins.items()}
    common = {
        "attempts": {
            "flaky-constant": 4,
            "flaky-linear": 4,
            "flaky-exponential": 4,
            "doomed": 2,
            "refused": 1,
        },
        "results": [4, 4, 4],
        "waited": dict.fromkeys(expected, True),
        "doomed": True,
    }
    mf = seen["miniflare"]
    mf.pop("exact gaps")  # real timers: only the lower bounds ("waited") hold there
    assert mf == {**common, "refused": "NonRetryableError: refused for good"}
    assert seen["doemu"] == {**common, "refused": "refused for good", "exact gaps": True}


def test_an_uncaught_non_retryable_error_ends_the_instance_errored(
    twins: dict[str, Twin],
) -> None:
    """A step raising ``NonRetryableError`` with retries left runs once, and when ``run()``
    does not catch it the instance is ``errored``. The error differs by language: Miniflare's
    engine reports a JavaScript ``NonRetryableError`` as ``WorkflowFatalError`` ("…threw an
    NonRetryableError and it was not handled"); a Python one leaves ``run()`` as a Pyodide
    ``PythonError`` (its traceback as the message, ending with the error), which is what doemu
    reports."""

    def scenario(t: Twin) -> dict[str, Any]:
        t.post("/create", {"id": "fatal-1", "params": {"kind": "fatal", "delay": 100}})
        final = until_status(t, "fatal-1", "errored")
        return {"steps": [e for e in effects(t, "fatal-1") if e != "run"], "error": final["error"]}

    seen = {name: scenario(t) for name, t in twins.items()}
    assert seen["miniflare"] == {
        "steps": ["fatal"],
        "error": {
            "name": "WorkflowFatalError",
            "message": "The execution of the Workflow instance was terminated, as a step threw "
            "an NonRetryableError and it was not handled",
        },
    }
    ours = seen["doemu"]
    assert ours["steps"] == ["fatal"]
    assert ours["error"]["name"] == "Error"
    assert ours["error"]["message"].startswith("PythonError: Traceback")
    assert ours["error"]["message"].rstrip().endswith("NonRetryableError: no point in retrying")


def test_events_reach_wait_for_event_before_or_during_the_wait_and_a_timeout_raises(
    twins: dict[str, Twin],
) -> None:
    """An event sent before its ``wait_for_event`` began is kept for it; one sent while the
    instance waits wakes it with its payload and type; a wait with a 300 ms timeout and no event
    raises "Execution timed out after 300ms" into ``run()``.

    Differences: while it waits the status is ``waiting`` on doemu, ``running`` on Miniflare;
    the timeout reaches the JavaScript ``run()`` as a plain ``Error`` (its name lost on the way
    back from the engine) and the Python one as ``WorkflowTimeoutError``; ``run()`` started once
    on Miniflare, three times on doemu (the first run, the event, the timeout)."""

    def scenario(t: Twin) -> dict[str, Any]:
        t.post("/create", {"id": "events-1", "params": {"kind": "events", "timeout": 300}})
        sent = t.post("/event", {"id": "events-1", "type": "early", "payload": {"x": 1}})
        t.settle(
            lambda: "waiting for approval" in effects(t, "events-1"),
            what="the early event taken",
            tick_ms=0,
        )
        waiting = until_status(t, "events-1", WAITING[t.name], tick_ms=0)["status"]
        approve = {"id": "events-1", "type": "approve", "payload": {"user": "ana"}}
        assert t.post("/event", approve) == {"ok": True}
        final = until_status(t, "events-1", "complete")
        output = final["output"]
        late = output.pop("late")
        return {
            "sent": sent,
            "while waiting": waiting,
            "output": output,
            "late": late,
            "runs": effects(t, "events-1").count("run"),
        }

    seen = {name: scenario(t) for name, t in twins.items()}
    common = {
        "sent": {"ok": True},
        "output": {"early": {"x": 1}, "approval": {"user": "ana"}, "type": "approve"},
    }
    assert seen["miniflare"] == {
        **common,
        "while waiting": "running",
        "late": "Error: Execution timed out after 300ms",
        "runs": 1,
    }
    assert seen["doemu"] == {
        **common,
        "while waiting": "waiting",
        "late": "WorkflowTimeoutError: Execution timed out after 300ms",
        "runs": 3,
    }


def test_terminate_restart_complete_and_the_binding_errors(twins: dict[str, Twin]) -> None:
    """An instance waiting for an event is terminated (``terminated``; terminating it again is
    refused with the engine's text), restarted (its steps run again from scratch: the side
    effect of ``work`` counts two), and completed by the event (``complete`` with its output).
    ``get`` of an unknown id fails with ``instance.not_found``.

    Differences: ``create`` with an id that exists fails on doemu with Cloudflare's
    ``(instance.already_exists) Instance already exists``, while Miniflare answers the existing
    instance; the engine's ``WorkflowError`` reaches the caller on Miniflare with its name folded
    into the message (``WorkflowError: (instance.cannot_terminate) …``, as workerd passes a
    custom error over RPC), on doemu as the engine's text alone."""

    def scenario(t: Twin) -> dict[str, Any]:
        t.post("/create", {"id": "life-1", "params": {"kind": "lifecycle"}})
        until_status(t, "life-1", WAITING[t.name], tick_ms=0)
        assert control(t, "life-1", "terminate") == {"ok": True}
        terminated = until_status(t, "life-1", "terminated", tick_ms=0)
        again = control(t, "life-1", "terminate")
        assert control(t, "life-1", "restart") == {"ok": True}
        t.settle(lambda: effects(t, "life-1").count("work") == 2, what="work again", tick_ms=0)
        until_status(t, "life-1", WAITING[t.name], tick_ms=0)
        assert t.post("/event", {"id": "life-1", "type": "go", "payload": 7}) == {"ok": True}
        final = until_status(t, "life-1", "complete")
        return {
            "terminated": terminated,
            "terminate again": again,
            "steps": [e for e in effects(t, "life-1") if e != "run"],
            "final": final,
            "unknown": t.get("/status", id="no-such-instance"),
            "taken id": t.post("/create", {"id": "life-1", "params": {"kind": "lifecycle"}}),
        }

    seen = {name: scenario(t) for name, t in twins.items()}
    common = {
        "terminated": {"status": "terminated", "output": None, "error": None},
        "steps": ["work", "work"],
        "final": {"status": "complete", "output": {"done": 7}, "error": None},
        "unknown": {"error": "instance.not_found"},
    }
    finite = "(instance.cannot_terminate) Cannot terminate instance since its on a finite state"
    assert seen["miniflare"] == {
        **common,
        "terminate again": {"error": f"WorkflowError: {finite}"},
        "taken id": {"id": "life-1"},
    }
    assert seen["doemu"] == {
        **common,
        "terminate again": {"error": finite},
        "taken id": {"error": "(instance.already_exists) Instance already exists"},
    }
