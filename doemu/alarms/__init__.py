"""Durable alarms: the per-namespace alarm table, one scheduler for all objects, the service
that mirrors commits, delivers, retries and answers what is pending."""

from __future__ import annotations

from .scheduler import MAX_CONCURRENT_DELIVERIES as MAX_CONCURRENT_DELIVERIES
from .scheduler import AlarmKey as AlarmKey
from .scheduler import AlarmScheduler as AlarmScheduler
from .service import MAX_ALARM_RETRIES as MAX_ALARM_RETRIES
from .service import AlarmInfo as AlarmInfo
from .service import AlarmService as AlarmService
from .service import AlarmTarget as AlarmTarget
from .service import retry_delay_ms as retry_delay_ms
from .table import AlarmTable as AlarmTable
from .table import load_alarms as load_alarms

__all__ = [
    "MAX_ALARM_RETRIES",
    "MAX_CONCURRENT_DELIVERIES",
    "AlarmInfo",
    "AlarmKey",
    "AlarmScheduler",
    "AlarmService",
    "AlarmTable",
    "AlarmTarget",
    "load_alarms",
    "retry_delay_ms",
]
