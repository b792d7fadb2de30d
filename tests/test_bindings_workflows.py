"""Workflows in process: steps that run once, durable sleeps, events, retries and statuses.

A workflow instance is an object of an internal namespace whose alarm drives the run; these tests
drive it with the manual clock (``advance``) and restart the runtime on the same persist
directory to prove what survives. Side effects are counted in module-level counters, which a
replay would bump again if it re-ran a finished step.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

import pytest
from pyodide.ffi import JsException
from workers import WorkflowEntrypoint
from workers.workflows import NonRetryableError

from doemu.bindings.workflows import WorkflowError
from doemu.compat.rpc import JsDict
from doemu.config.bindings import WorkerResources, WorkflowBinding
from doemu.testing.plugin import HarnessFactory

RUNS: Counter[str] = Counter()


class Pipeline(WorkflowEntrypoint):
    """fetch → sleep 1 minute → wait for "approve" → publish (retried until its third try)."""

    async def run(self, event: Any, step: Any) -> Any:
        key = event["payload"]["key"]

        @step.do()
        async def fetch() -> Any:
            RUNS[f"{key}:fetch"] += 1
            return {"rows": [1, 2, 3], "at": event["instanceId"]}

        rows = await fetch()
        await step.sleep("cool down", "1 minute")
        approval = await step.wait_for_event("approval", "approve", timeout="1 hour")

        @step.do(config={"retries": {"limit": 3, "delay": "10 seconds", "backoff": "linear"}})
        async def publish(fetch: Any, ctx: Any) -> Any:
            RUNS[f"{key}:publish"] += 1
            if ctx["attempt"] < 3:
                raise RuntimeError(f"flaky {ctx['attempt']}")
            return sum(fetch["rows"]) + approval["payload"]["bonus"]

        return {"total": await publish(), "rows": rows}


class Failing(WorkflowEntrypoint):
    async def run(self, event: Any, step: Any) -> Any:
        mode = event["payload"]["mode"]

        @step.do(config={"retries": {"limit": 2, "delay": 1000, "backoff": "exponential"}})
        async def attempt() -> Any:
            RUNS[f"{mode}:attempt"] += 1
            if mode == "fatal":
                raise NonRetryableError("stop now")
            if mode == "value":
                raise ValueError("bad value")
            if mode == "big":
                return "x" * (1024 * 1024 + 10)
            raise RuntimeError("always")

        try:
            await attempt()
        except NonRetryableError as exc:
            return {"caught": type(exc).__name__, "message": str(exc)}
        return "unreachable"


class Legacy(WorkflowEntrypoint):
    async def run(self, event: Any, step: Any) -> Any:
        @step.do("a")
        async def a() -> int:
            return 2

        @step.do("b", depends=[a], concurrent=True)
        async def b(x: int) -> int:
            return x * 10

        return await b()


class Timed(WorkflowEntrypoint):
    async def run(self, event: Any, step: Any) -> Any:
        try:
            await step.wait_for_event("never", "nope", timeout="5 seconds")
        except JsException as exc:
            outcome = str(exc)
        until = dt.datetime.fromtimestamp(event["payload"]["until"] / 1000)
        await step.sleep_until("later", until)
        return outcome


def _resources(*specs: tuple[str, str, str], implicit: bool = True) -> WorkerResources:
    return WorkerResources(workflows=tuple(WorkflowBinding(b, n, c, implicit) for b, n, c in specs))


async def _harness(doemu_harness: HarnessFactory, **options: Any) -> Any:
    return await doemu_harness(
        {},
        resources=_resources(
            ("PIPE", "pipeline", "Pipeline"),
            ("FAIL", "failing", "Failing"),
            ("TIMED", "timed", "Timed"),
        ),
        entrypoints={"Pipeline": Pipeline, "Failing": Failing, "Timed": Timed},
        **options,
    )


async def test_a_finished_step_never_runs_again_across_sleeps_events_and_restarts(
    doemu_harness: HarnessFactory, tmp_path: Any
) -> None:
    """1. create → the first step runs once, then the instance sleeps ("waiting").
    2. The runtime restarts during the sleep; the minute passes; the instance wakes by itself.
    3. It waits for "approve"; the runtime restarts again; the event arrives; publish fails twice
       and succeeds on its third attempt (linear back-off: 10 s, then 20 s).
    4. fetch ran exactly once across three replays and two restarts."""
    h = await _harness(doemu_harness, persist_dir=tmp_path / "state")
    instance = await h.env.PIPE.create(id="order-1", params={"key": "o1"})
    assert instance.id == "order-1"
    await h.advance(0)
    status = await instance.status()
    assert isinstance(status, JsDict) and status.status == "waiting"
    assert RUNS["o1:fetch"] == 1
    await h.restart()
    await h.advance(60_000)
    assert (await (await h.env.PIPE.get("order-1")).status())["status"] == "waiting"
    await h.restart()
    handle = await h.env.PIPE.get("order-1")
    await handle.sendEvent(type="approve", payload={"bonus": 100})
    await h.advance(0)
    assert RUNS["o1:publish"] == 1
    await h.advance(10_000)
    assert RUNS["o1:publish"] == 2
    await h.advance(20_000)
    done = await handle.status()
    assert done == {
        "status": "complete",
        "error": None,
        "output": {"total": 106, "rows": {"rows": [1, 2, 3], "at": "order-1"}},
    }
    assert RUNS["o1:fetch"] == 1 and RUNS["o1:publish"] == 3


async def test_an_event_sent_before_the_wait_is_kept_and_send_event_is_the_same_call(
    doemu_harness: HarnessFactory,
) -> None:
    h = await _harness(doemu_harness)
    instance = await h.env.PIPE.create(id="early", params={"key": "early"})
    await instance.send_event(type="approve", payload={"bonus": 1})  # before the wait
    await h.advance(60_000)
    await h.advance(10_000)
    await h.advance(20_000)
    assert (await instance.status())["output"]["total"] == 7


async def test_retries_non_retryable_errors_and_oversized_results(
    doemu_harness: HarnessFactory,
) -> None:
    h = await _harness(doemu_harness)
    fatal = await h.env.FAIL.create(params={"mode": "fatal"})
    always = await h.env.FAIL.create(params={"mode": "always"})
    value = await h.env.FAIL.create(params={"mode": "value"})
    big = await h.env.FAIL.create(params={"mode": "big"})
    await h.advance(0)
    await h.advance(1_000)  # exponential: 1 s, then 2 s
    await h.advance(2_000)
    assert RUNS["fatal:attempt"] == 1  # not retried
    assert (await fatal.status())["output"] == {
        "caught": "NonRetryableError",
        "message": "stop now",
    }
    assert RUNS["always:attempt"] == 3  # the first attempt and two retries
    failed = await always.status()
    assert failed["status"] == "errored" and failed["output"] is None
    assert failed["error"]["name"] == "Error"
    assert failed["error"]["message"].startswith("PythonError: Traceback")
    assert failed["error"]["message"].rstrip().endswith("RuntimeError: always")
    bad_value = await value.status()
    assert bad_value["error"]["message"].rstrip().endswith("ValueError: ValueError: bad value")
    assert RUNS["big:attempt"] == 1  # refused at once, not retried
    too_big = await big.status()
    assert too_big["status"] == "errored"
    assert too_big["error"] == {
        "name": "WorkflowFatalError",
        "message": "Step attempt-1 output is too large. Maximum allowed size is 1MiB.",
    }


async def test_wait_for_event_times_out_and_sleep_until_is_durable(
    doemu_harness: HarnessFactory, tmp_path: Any
) -> None:
    h = await _harness(doemu_harness, persist_dir=tmp_path / "state")
    until = h.clock.now() + 3_600_000
    instance = await h.env.TIMED.create(id="t1", params={"until": until})
    await h.advance(5_000)
    assert (await instance.status())["status"] == "waiting"
    await h.restart()
    await h.advance(3_600_000)
    status = await (await h.env.TIMED.get("t1")).status()
    assert status["status"] == "complete"
    assert status["output"] == "WorkflowTimeoutError: Execution timed out after 5000ms"


async def test_pause_resume_terminate_and_restart(doemu_harness: HarnessFactory) -> None:
    h = await _harness(doemu_harness)
    instance = await h.env.PIPE.create(id="ctl", params={"key": "ctl"})
    await h.advance(0)
    await instance.pause()
    assert (await instance.status())["status"] == "paused"
    await h.advance(120_000)  # the sleep ends while paused: nothing runs
    assert (await instance.status())["status"] == "paused"
    await instance.resume()
    await h.advance(0)
    assert (await instance.status())["status"] == "waiting"  # now on the event
    await instance.terminate()
    assert (await instance.status())["status"] == "terminated"
    with pytest.raises(WorkflowError) as refused:
        await instance.terminate()
    # The engine's text with its code, as e2e/test_workflows_differential.py sees on Miniflare.
    assert refused.value.message == (
        "(instance.cannot_terminate) Cannot terminate instance since its on a finite state"
    )
    await instance.restart()
    await h.advance(0)
    assert RUNS["ctl:fetch"] == 2  # a restart runs every step again
    assert (await instance.status())["status"] == "waiting"


async def test_bad_input_gets_the_engines_errors(doemu_harness: HarnessFactory) -> None:
    h = await _harness(doemu_harness)
    wf = h.env.PIPE
    with pytest.raises(JsException, match=r"^Error: instance\.not_found$"):
        await wf.get("nobody")
    assert h.runtime.extra.workflows["PIPE"].stored_ids() == []  # looking made no file
    for bad in ("has space", "-dash", "x" * 101, 42):
        with pytest.raises(JsException, match="Workflow instance has invalid id"):
            await wf.create(id=bad)
    await wf.create(id="dup", params={"key": "dup"})
    with pytest.raises(JsException, match=r"\(instance\.already_exists\) Instance already exists"):
        await wf.create(id="dup")
    with pytest.raises(JsException, match=r"params is too large.*1 MiB"):
        await wf.create(id="huge", params={"x": "y" * (1024 * 1024)})
    with pytest.raises(JsException, match="batchCreate should have at least 1 instance"):
        await wf.createBatch([])
    batch = await wf.create_batch(
        [{"id": "b1", "params": {"key": "b1"}}, {"params": {"key": "b2"}}]
    )
    assert batch[0].id == "b1" and len(batch) == 2
    handle = batch[1]
    with pytest.raises(JsException, match="sendEvent needs a type"):
        await handle.sendEvent(payload=1)


async def test_legacy_depends_and_a_missing_class(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness(
        {},
        resources=WorkerResources(
            workflows=(
                WorkflowBinding("OLD", "old", "Legacy", implicit_dependencies=False),
                WorkflowBinding("GONE", "gone", "Nowhere"),
            )
        ),
        entrypoints={"Legacy": Legacy},
    )
    old = await h.env.OLD.create()
    gone = await h.env.GONE.create()
    await h.advance(0)
    assert (await old.status())["output"] == 20
    missing = await gone.status()
    assert missing["status"] == "errored" and "Nowhere" in missing["error"]["message"]


def test_config_reads_workflows_with_wranglers_keys(tmp_path: Any) -> None:
    from doemu.config import ConfigValueError, parse_config

    config = parse_config(
        {
            "name": "w",
            "main": "main.py",
            "compatibility_date": "2025-11-01",
            "workflows": [{"binding": "WF", "name": "my-wf", "class_name": "MyWorkflow"}],
        },
        base_dir=tmp_path,
    )
    (spec,) = config.resources.workflows
    assert spec == WorkflowBinding("WF", "my-wf", "MyWorkflow", False, 10_000)
    with pytest.raises(ConfigValueError) as bad:
        parse_config(
            {"name": "w", "main": "main.py", "workflows": [{"binding": "WF", "name": "a b"}]},
            base_dir=tmp_path,
        )
    assert "workflows[0].class_name is required" in str(bad.value)
    assert "workflows[0].name must be 1-64 letters" in str(bad.value)


async def test_the_admin_api_lists_instances_and_shows_steps(tmp_path: Any) -> None:
    from doemu.clock import ManualClock
    from doemu.control import RuntimeControl
    from doemu.runtime import Runtime
    from doemu.server.app import DoemuApp

    from .admin_helpers import API, T0, client

    runtime = Runtime(
        worker_name="wf-admin",
        classes={},
        persist_dir=tmp_path / "state",
        clock=ManualClock(T0),
        resources=_resources(("PIPE", "pipeline", "Pipeline")),
        entrypoints={"Pipeline": Pipeline},
    )
    await runtime.start()
    try:
        await runtime.env.PIPE.create(id="seen", params={"key": "admin"})
        await RuntimeControl(runtime).advance(0)
        async with client(DoemuApp(runtime)) as http:
            listed = (await http.get(f"{API}/workflows")).json()
            assert listed == [
                {
                    "binding": "PIPE",
                    "name": "pipeline",
                    "class_name": "Pipeline",
                    "total": 1,
                    "statuses": {"waiting": 1},
                    "instances": [
                        {"id": "seen", "status": "waiting", "error": None, "output": None}
                    ],
                }
            ]
            one = (await http.get(f"{API}/workflows/PIPE/instances/seen")).json()
            assert one["params"] == {"key": "admin"}
            assert [(s["kind"], s["name"], s["state"]) for s in one["steps"]] == [
                ("do", "fetch", "done"),
                ("sleep", "cool down", "sleeping"),
            ]
            assert one["steps"][1]["wakeAt"] == T0 + 60_000
            missing = await http.get(f"{API}/workflows/PIPE/instances/nobody")
            assert missing.status_code == 404
            assert "no instance 'nobody'" in missing.json()["error"]
            unknown = await http.get(f"{API}/workflows/NOPE/instances/x")
            assert unknown.status_code == 404
    finally:
        await runtime.close()
