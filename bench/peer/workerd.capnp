# The benchmark contract on bare workerd. serve.sh passes the listening address
# (--socket-addr http=127.0.0.1:PORT) and the state folder (--directory-path state=DIR).
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .bench),
    (name = "state", disk = (writable = true)),
  ],
  sockets = [(name = "http", address = "127.0.0.1:8788", http = (), service = "main")],
);

const bench :Workerd.Worker = (
  modules = [(name = "worker.mjs", esModule = embed "worker.mjs")],
  compatibilityDate = "2026-10-01",
  bindings = [(name = "BENCH", durableObjectNamespace = "BenchDO")],
  durableObjectNamespaces = [(className = "BenchDO", uniqueKey = "doemu-bench-BenchDO", enableSql = true)],
  durableObjectStorage = (localDisk = "state"),
);
