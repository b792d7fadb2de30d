#!/usr/bin/env bash
# Serves worker.mjs on the pinned bare workerd binary (no miniflare, no wrangler).
#   bench/peer/serve.sh PORT STATE_DIR
# exec keeps workerd in the caller's process group, so SIGKILL of the group stops everything.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port="${1:?port}"
state="$(realpath -m "${2:?state dir}")"
bin="$here/node_modules/@cloudflare/workerd-linux-64/bin/workerd"
[ -x "$bin" ] || { echo "workerd missing: run (cd bench/peer && npm ci)" >&2; exit 1; }
mkdir -p "$state"
exec "$bin" serve --experimental --socket-addr "http=127.0.0.1:$port" \
  --directory-path "state=$state" "$here/workerd.capnp"
