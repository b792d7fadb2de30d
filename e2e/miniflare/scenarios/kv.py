"""KV, the same calls on Miniflare (workerd-Python) and on doemu: e2e/test_bindings_differential.py.

Each step records what Python code sees: the value (type and content) or the error (its type and
str()). Values that differ on every run (expirations) are recorded relative to now."""

import json
import time

from record import seen, step
from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        kv = self.env.KV
        out = {}
        now = int(time.time())
        await step(out, "put", lambda: kv.put("a", "hello", metadata={"x": 1, "n": None}))
        await step(out, "get", lambda: kv.get("a"))
        await step(out, "get_missing", lambda: kv.get("nope"))
        await step(out, "gwm", lambda: kv.getWithMetadata("a"))
        await step(out, "gwm_missing", lambda: kv.getWithMetadata("nope"))
        doc = json.dumps({"a": [1, 2.0, 2.5, None], "b": {"c": True}})
        await step(out, "put_json", lambda: kv.put("j", doc))
        await step(out, "get_json", lambda: kv.get("j", type="json"))
        await step(out, "get_json_positional", lambda: kv.get("j", "json"))
        await step(out, "get_array_buffer", lambda: kv.get("a", type="arrayBuffer"))
        await step(out, "put_bytes", lambda: kv.put("b", b"\x00\x01\xff"))
        await step(out, "get_bytes_text", lambda: kv.get("b"))
        await step(out, "get_bytes_buffer", lambda: kv.get("b", type="arrayBuffer"))
        await step(out, "put_int", lambda: kv.put("i", 5))
        await step(out, "get_int", lambda: kv.get("i"))
        await step(out, "get_int_json", lambda: kv.get("i", type="json"))
        await step(out, "put_none", lambda: kv.put("n", None))
        await step(out, "get_none", lambda: kv.get("n"))
        await step(out, "put_bool", lambda: kv.put("t", True))
        await step(out, "get_bool", lambda: kv.get("t"))
        await step(out, "put_dict", lambda: kv.put("d", {"a": 1}))
        await step(out, "put_empty_key", lambda: kv.put("", "v"))
        await step(out, "get_empty_key", lambda: kv.get(""))
        await step(out, "put_dot", lambda: kv.put(".", "v"))
        await step(out, "get_dotdot", lambda: kv.get(".."))
        await step(out, "put_long_key", lambda: kv.put("x" * 600, "v"))
        await step(out, "get_long_key", lambda: kv.get("k" * 513))
        await step(out, "get_bad_type", lambda: kv.get("a", type="xml"))
        await step(out, "get_cache_ttl_low", lambda: kv.get("a", cacheTtl=10))
        await step(out, "get_cache_ttl_ok", lambda: kv.get("a", cacheTtl=60))
        await step(out, "put_big_metadata", lambda: kv.put("m", "v", metadata={"x": "y" * 1100}))
        await step(out, "put_string_metadata", lambda: kv.put("ms", "v", metadata="str"))
        await step(out, "put_ttl_low", lambda: kv.put("e", "v", expirationTtl=10))
        await step(out, "put_ttl_negative", lambda: kv.put("e", "v", expirationTtl=-5))
        await step(out, "put_ttl_string", lambda: kv.put("e", "v", expirationTtl="100"))
        await step(out, "put_expiration_past", lambda: kv.put("e", "v", expiration=10))
        await step(out, "put_expiration_near", lambda: kv.put("e", "v", expiration=now + 30))
        out["put_expiration_near"] = [
            str(x).replace(str(now + 30), "now+30") for x in out["put_expiration_near"]
        ]
        await step(
            out, "put_both", lambda: kv.put("e2", "v", expirationTtl=100, expiration=now + 1000)
        )
        await step(out, "put_snake", lambda: kv.put("e3", "v", expiration_ttl=100))
        await step(out, "put_options_dict", lambda: kv.put("e4", "v", {"expirationTtl": 100}))
        await step(out, "put_too_big", lambda: kv.put("big", "x" * (25 * 1024 * 1024 + 1)))
        await step(out, "delete", lambda: kv.delete("e4"))
        await step(out, "delete_missing", lambda: kv.delete("never"))
        await step(out, "delete_empty", lambda: kv.delete(""))
        for i in range(5):
            await kv.put(f"p/{i}", str(i))
        await step(out, "list_page", lambda: kv.list(prefix="p/", limit=2))
        first = await kv.list(prefix="p/", limit=2)
        await step(out, "list_next", lambda: kv.list(prefix="p/", limit=2, cursor=first.cursor))
        await step(out, "list_bad_cursor", lambda: kv.list(cursor="garbage"))
        await step(out, "list_limit_0", lambda: kv.list(prefix="p/", limit=0))
        await step(out, "list_limit_2000", lambda: kv.list(limit=2000))
        await step(out, "list_limit_negative", lambda: kv.list(prefix="p/", limit=-1))
        await step(out, "list_long_prefix", lambda: kv.list(prefix="x" * 600))
        listing = await kv.list()
        # Expirations relative to now, to the nearest 10 s (a second may pass between puts).
        out["list_all"] = [
            [
                k["name"],
                "expiration" in k and round((k["expiration"] - now) / 10) * 10,
                seen(k.get("metadata")),
            ]
            for k in listing["keys"]
        ]
        out["list_all_complete"] = [listing["list_complete"], "cursor" in listing]
        await step(out, "bulk_get", lambda: kv.get(["p/1", "p/2", "zz"]))
        await step(out, "bulk_get_json", lambda: kv.get(["i", "zz"], type="json"))
        await step(out, "bulk_gwm", lambda: kv.getWithMetadata(["a", "zz"]))
        await step(out, "bulk_not_json", lambda: kv.get(["a"], type="json"))
        await step(out, "bulk_empty", lambda: kv.get([]))
        await step(out, "bulk_too_many", lambda: kv.get([str(i) for i in range(101)]))
        await step(out, "bulk_array_buffer", lambda: kv.get(["a"], type="arrayBuffer"))
        await step(out, "get_key_int", lambda: kv.get(5))
        await step(out, "put_tuple", lambda: kv.put(("a", "b"), "v"))
        stream = await kv.get("a", type="stream")
        out["stream"] = seen(
            getattr(getattr(stream, "constructor", None), "name", type(stream).__name__)
        )
        return Response(json.dumps(out), headers={"content-type": "application/json"})
