"""The admin tests' runtime: classes with SQL, KV and alarms, a manual clock, an httpx client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from workers import DurableObject

from doemu.clock import ManualClock
from doemu.control import RuntimeControl
from doemu.runtime import ClassSpec, Runtime
from doemu.server.admin import ADMIN_PREFIX
from doemu.server.app import DoemuApp

__all__ = ["ALARMS", "API", "JSON_TYPE", "T0", "Admin", "admin_on", "client", "make_runtime"]

T0 = 1_700_000_000_000.0
API = ADMIN_PREFIX
JSON_TYPE = {"content-type": "application/json"}
ALARMS: list[tuple[str | None, float]] = []


class Box(DurableObject):
    """SQL, KV and an alarm handler: everything the admin API can look at."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec(
            "CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, label TEXT, blob BLOB)"
        )

    async def add(self, label: str, blob: bytes | None = None) -> None:
        self.ctx.storage.sql.exec("INSERT INTO items(label, blob) VALUES (?, ?)", label, blob)

    async def put(self, key: str, value: Any) -> None:
        await self.ctx.storage.put(key, value)

    async def arm(self, at_ms: float) -> None:
        await self.ctx.storage.setAlarm(at_ms)

    async def alarm(self, alarm_info: Any) -> None:
        ALARMS.append((self.ctx.id.name, alarm_info.scheduledTime))
        await self.ctx.storage.put("alarm-ran", alarm_info.scheduledTime)


class Legacy(DurableObject):
    """A KV-only class (no ``new_sqlite_classes`` migration): write SQL is refused."""

    async def put(self, key: str, value: Any) -> None:
        await self.ctx.storage.put(key, value)


class Broken(DurableObject):
    """A constructor that throws: waking it from the admin API must be a JSON 500."""

    def __init__(self, ctx: Any, env: Any) -> None:
        raise RuntimeError("constructor exploded")


@dataclass
class Admin:
    runtime: Runtime
    clock: ManualClock
    app: DoemuApp
    http: httpx.AsyncClient

    @property
    def control(self) -> RuntimeControl:
        return RuntimeControl(self.runtime)

    def id_of(self, binding: str, name: str) -> str:
        return str(self.runtime.bindings[binding].ids.from_name(name))

    def live(self, binding: str, name: str) -> bool:
        host = self.runtime.bindings[binding].hosts.get(self.id_of(binding, name))
        return host is not None and host.live

    def stub(self, binding: str, name: str) -> Any:
        return getattr(self.runtime.env, binding).getByName(name)


def make_runtime(persist_dir: Path, clock: ManualClock | None) -> Runtime:
    return Runtime(
        worker_name="admin-test",
        classes={
            "Box": ClassSpec(Box),
            "Legacy": ClassSpec(Legacy, sql=False),
            "Broken": ClassSpec(Broken),
        },
        bindings={"BOX": "Box", "LEGACY": "Legacy", "BROKEN": "Broken"},
        persist_dir=persist_dir,
        clock=clock,
    )


def client(app: DoemuApp, host: str = "127.0.0.1") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(host, 1234))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8787")


@asynccontextmanager
async def admin_on(tmp_path: Path) -> AsyncIterator[Admin]:
    """The test runtime (manual clock at T0) behind an in-process admin client."""
    ALARMS.clear()
    clock = ManualClock(T0)
    runtime = make_runtime(tmp_path / "state", clock)
    await runtime.start()
    app = DoemuApp(runtime)
    async with client(app) as http:
        yield Admin(runtime, clock, app, http)
    await runtime.close()
