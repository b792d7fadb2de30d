# The JavaScript chat agent on bare workerd. The test passes the listening address
# (--socket-addr http=127.0.0.1:PORT), the state folder (--directory-path state=DIR), and the
# provider's address and key in the environment (PROVIDER_URL, PROVIDER_KEY), and the side-effect
# counter's (COUNTER_URL).
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .chat),
    (name = "state", disk = (writable = true)),
    (name = "internet", network = (allow = ["public", "private", "local"])),
  ],
  sockets = [(name = "http", address = "127.0.0.1:0", http = (), service = "main")],
);

const chat :Workerd.Worker = (
  modules = [(name = "worker.mjs", esModule = embed "worker.mjs")],
  compatibilityDate = "2026-10-01",
  bindings = [
    (name = "DiffChat", durableObjectNamespace = "DiffChat"),
    (name = "WatchedChat", durableObjectNamespace = "WatchedChat"),
    (name = "ApprovalChat", durableObjectNamespace = "ApprovalChat"),
    (name = "COUNTER_URL", fromEnvironment = "COUNTER_URL"),
    (name = "PROVIDER_URL", fromEnvironment = "PROVIDER_URL"),
    (name = "PROVIDER_KEY", fromEnvironment = "PROVIDER_KEY"),
  ],
  durableObjectNamespaces = [
    (className = "DiffChat", uniqueKey = "doemu-e2e-DiffChat", enableSql = true),
    (className = "WatchedChat", uniqueKey = "doemu-e2e-WatchedChat", enableSql = true),
    (className = "ApprovalChat", uniqueKey = "doemu-e2e-ApprovalChat", enableSql = true),
  ],
  durableObjectStorage = (localDisk = "state"),
  globalOutbound = "internet",
);
