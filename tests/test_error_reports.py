"""Errors inside objects, traced to the user's own line wherever they surface.

Before: an RPC method that raised showed the caller's line and ``stubs.py … from None``, never
the object's; a failing alarm logged one line without traceback, binding or name; a 500 that
was not an exception (``fetch`` returning a dict) left only ``GET /x 500`` in the terminal; a
browser got the same JSON as ``curl``; a constructor without ``super().__init__`` surfaced
later as a bare ``AttributeError``. Over RPC the caller's exception is Cloudflare's (a
``JsException`` ``PythonError`` carrying the callee's traceback, by default), or under
``--lenient`` a copy of the callee's, now caused by its frames.
"""

from __future__ import annotations

import logging
import traceback
from pathlib import Path
from typing import Any

import pytest
from workers import DurableObject, Response, WorkerEntrypoint

from doemu.jsboundary import JsException
from doemu.testing.plugin import HarnessFactory
from doemu.tracebacks import RemoteTraceback

HERE = Path(__file__).name


class Ledger(DurableObject):
    async def charge(self, amount: int) -> int:
        return self._check(amount)

    def _check(self, amount: int) -> int:
        if amount < 0:
            raise ValueError(f"negative amount {amount}")  # the line the caller must see
        return amount

    async def alarm(self) -> None:
        raise KeyError("no such invoice")

    async def fetch(self, request: Any) -> Any:
        if request.url.endswith("/dict"):
            return {"not": "a Response"}
        self._check(-1)
        return Response("unreachable")


class Forgetful(DurableObject):
    def __init__(self, ctx: Any, env: Any) -> None:
        self.started = True  # no super().__init__(ctx, env): self.ctx is never set

    async def value(self) -> Any:
        return await self.ctx.storage.get("n")


class Default(WorkerEntrypoint):
    async def fetch(self, request: Any) -> Any:
        return Response(str(await self.env.LEDGER.getByName("a").charge(-5)))


def _line_of(text: str) -> int:
    source = Path(__file__).read_text().splitlines()
    return next(i for i, line in enumerate(source, 1) if text in line)


async def test_an_rpc_error_carries_the_objects_own_frames(doemu_harness: HarnessFactory) -> None:
    """By default, as on Cloudflare: a ``PythonError`` whose message is the callee's traceback
    (the user's frames only)."""
    h = await doemu_harness({"LEDGER": Ledger})
    with pytest.raises(JsException) as raised:
        await h.env.LEDGER.getByName("a").charge(-3)
    assert raised.value.name == "PythonError"
    text = raised.value.message
    assert f'{HERE}", line {_line_of("the line the caller must see")}, in _check' in text
    assert text.rstrip().endswith("ValueError: negative amount -3")
    assert "doemu/objects/host.py" not in text


async def test_a_lenient_rpc_error_is_caused_by_the_objects_own_frames(
    doemu_harness: HarnessFactory, lenient: None
) -> None:
    h = await doemu_harness({"LEDGER": Ledger}, lenient=True)
    with pytest.raises(ValueError, match="negative amount -3") as raised:
        await h.env.LEDGER.getByName("a").charge(-3)
    cause = raised.value.__cause__
    assert isinstance(cause, RemoteTraceback)
    printed = "".join(traceback.format_exception(raised.value))
    assert "Traceback of Ledger.charge() in the object" in printed
    assert f'{HERE}", line {_line_of("the line the caller must see")}, in _check' in printed
    assert "doemu/objects/host.py" not in cause.text  # the user's frames, not the machinery


async def test_a_failing_alarm_logs_binding_name_and_traceback(
    doemu_harness: HarnessFactory, caplog: pytest.LogCaptureFixture
) -> None:
    h = await doemu_harness({"LEDGER": Ledger})
    await h.env.LEDGER.getByName("books").charge(1)
    await h.runtime.host("LEDGER", "books").ctx.storage.setAlarm(h.clock.now() + 10)
    with caplog.at_level(logging.WARNING, logger="doemu.alarms"):
        await h.advance(10)
    (record,) = [r for r in caplog.records if r.name == "doemu.alarms"]
    message = record.getMessage()
    assert message.startswith("alarm of LEDGER 'books' (")
    assert "raised KeyError: 'no such invoice'; retry 1 in" in message
    assert f'{HERE}", line {_line_of("no such invoice")}, in alarm' in message


async def test_a_500_is_logged_with_its_cause_and_browsers_get_a_page(
    doemu_harness: HarnessFactory, caplog: pytest.LogCaptureFixture
) -> None:
    h = await doemu_harness({"LEDGER": Ledger})
    with caplog.at_level(logging.ERROR, logger="doemu.server"):
        async with h.client() as http:
            api = await http.get("/LEDGER/a/boom")
            page = await http.get("/LEDGER/a/boom", headers={"accept": "text/html,*/*"})
            not_a_response = await http.get("/LEDGER/a/dict")
    assert api.status_code == 500 and api.json() == {"error": "ValueError: negative amount -1"}
    assert page.status_code == 500 and page.headers["content-type"].startswith("text/html")
    assert "<h1>500 Internal Server Error</h1>" in page.text
    assert "ValueError: negative amount -1" in page.text
    assert f"{HERE}&quot;, line {_line_of('the line the caller must see')}" in page.text
    assert not_a_response.status_code == 500
    logged = [r.getMessage() for r in caplog.records if r.name == "doemu.server"]
    assert logged[0].startswith("GET /LEDGER/a/boom answered 500: ValueError: negative amount")
    assert f'{HERE}", line {_line_of("the line the caller must see")}' in logged[0]
    assert logged[-1].startswith(
        "GET /LEDGER/a/dict answered 500: RpcError: fetch() of Ledger must return a Response, "
        "got dict"
    )


class DictWorker(WorkerEntrypoint):
    async def fetch(self, request: Any) -> Any:
        return {"not": "a Response"}


async def test_a_500_without_an_exception_is_logged_too(
    doemu_harness: HarnessFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """What used to leave only ``GET /dict 500`` in the terminal."""
    h = await doemu_harness({"LEDGER": Ledger})
    with caplog.at_level(logging.ERROR, logger="doemu.server"):
        async with h.client(entry=DictWorker) as http:
            assert (await http.get("/dict")).status_code == 500
    logged = [r.getMessage() for r in caplog.records if r.name == "doemu.server"]
    assert logged == ["GET /dict answered 500: fetch() must return a Response, got dict"]


async def test_the_page_shows_no_source_lines_to_another_machine(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"LEDGER": Ledger})
    import httpx

    transport = httpx.ASGITransport(app=h.app(), client=("192.0.2.7", 4000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        page = await http.get("/LEDGER/a/boom", headers={"accept": "text/html"})
    assert "ValueError: negative amount -1" in page.text and "<pre>" not in page.text


async def test_an_rpc_error_through_the_entry_worker_names_both_lines(
    doemu_harness: HarnessFactory, caplog: pytest.LogCaptureFixture
) -> None:
    h = await doemu_harness({"LEDGER": Ledger})
    with caplog.at_level(logging.ERROR, logger="doemu.server"):
        async with h.client(entry=Default) as http:
            assert (await http.get("/charge")).status_code == 500
    (logged,) = [r.getMessage() for r in caplog.records if r.name == "doemu.server"]
    assert logged.startswith("GET /charge answered 500: JsException: PythonError")
    assert f'{HERE}", line {_line_of("the line the caller must see")}' in logged
    assert f'{HERE}", line {_line_of("charge(-5)")}, in fetch' in logged


async def test_a_constructor_without_super_init_is_named(
    doemu_harness: HarnessFactory, caplog: pytest.LogCaptureFixture
) -> None:
    h = await doemu_harness({"FORGETFUL": Forgetful})
    with caplog.at_level(logging.WARNING, logger="doemu.objects"):
        with pytest.raises(JsException) as raised:
            await h.env.FORGETFUL.getByName("x").value()
        with pytest.raises(JsException):
            await h.env.FORGETFUL.getByName("y").value()
    advice = (
        f"Forgetful.__init__ ({Path(__file__)}:{_line_of('def __init__(self, ctx: Any')}) does "
        "not call super().__init__(ctx, env), so self.ctx and self.env are never set"
    )
    warnings = [r.getMessage() for r in caplog.records if r.name == "doemu.objects"]
    assert len(warnings) == 1 and warnings[0].startswith(advice)  # once per class
    assert "AttributeError: 'Forgetful' object has no attribute 'ctx'" in raised.value.message
    assert advice in raised.value.message  # and beside the AttributeError itself
