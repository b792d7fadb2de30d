#!/usr/bin/env bash
# Serves the chat peer (worker.mjs, built by build.sh) on the pinned bare workerd binary.
#   bench/peer-chat/serve.sh PORT STATE_DIR PROVIDER_URL
# exec keeps workerd in the caller's process group, so SIGKILL of the group stops everything.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port="${1:?port}"
state="$(realpath -m "${2:?state dir}")"
export PROVIDER_URL="${3:?provider url}"
bin="$here/node_modules/@cloudflare/workerd-linux-64/bin/workerd"
[ -x "$bin" ] || { echo "workerd missing: run (cd bench/peer-chat && npm ci)" >&2; exit 1; }
[ -f "$here/worker.mjs" ] || { echo "worker.mjs missing: run bench/peer-chat/build.sh" >&2; exit 1; }
mkdir -p "$state"
exec "$bin" serve --experimental --socket-addr "http=127.0.0.1:$port" \
  --directory-path "state=$state" "$here/workerd.capnp"
