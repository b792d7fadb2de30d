# The chat rows' JavaScript peer on bare workerd. serve.sh passes the listening address
# (--socket-addr http=127.0.0.1:PORT), the state folder (--directory-path state=DIR) and the fake
# provider's address in the environment (PROVIDER_URL), which the worker reads as a text binding.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .chat),
    (name = "state", disk = (writable = true)),
    # outbound fetch() from the agent to the provider on loopback
    (name = "internet", network = (allow = ["public", "private", "local"])),
  ],
  sockets = [(name = "http", address = "127.0.0.1:8789", http = (), service = "main")],
);

const chat :Workerd.Worker = (
  modules = [(name = "worker.mjs", esModule = embed "worker.mjs")],
  compatibilityDate = "2026-10-01",
  bindings = [
    (name = "ChatBench", durableObjectNamespace = "ChatBench"),
    (name = "PROVIDER_URL", fromEnvironment = "PROVIDER_URL"),
  ],
  durableObjectNamespaces = [
    (className = "ChatBench", uniqueKey = "doemu-bench-ChatBench", enableSql = true),
  ],
  durableObjectStorage = (localDisk = "state"),
  globalOutbound = "internet",
);
