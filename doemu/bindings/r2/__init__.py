"""R2 buckets (``r2_buckets``): object bodies as files, their metadata in SQLite.

:mod:`~doemu.bindings.r2.store` keeps a bucket on disk (whole files only, see its docstring);
:mod:`~doemu.bindings.r2.bucket` is what user code holds (``env.BUCKET.get/put/…``, multipart
uploads); :mod:`~doemu.bindings.r2.objects` the ``R2Object``/``R2ObjectBody`` it returns;
:mod:`~doemu.bindings.r2.conditions` the ``onlyIf`` and ``range`` rules.
"""

from __future__ import annotations

from .bucket import R2_LIMITS as R2_LIMITS
from .bucket import R2Bucket as R2Bucket
from .bucket import R2Error as R2Error
from .bucket import R2MultipartUpload as R2MultipartUpload
from .objects import R2Checksums as R2Checksums
from .objects import R2Object as R2Object
from .objects import R2ObjectBody as R2ObjectBody
from .store import R2Store as R2Store

__all__ = [
    "R2_LIMITS",
    "R2Bucket",
    "R2Checksums",
    "R2Error",
    "R2MultipartUpload",
    "R2Object",
    "R2ObjectBody",
    "R2Store",
]
