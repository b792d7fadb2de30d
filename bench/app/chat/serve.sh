#!/usr/bin/env bash
# Serves the chat agent on doemu with the fake provider's address as [vars] PROVIDER_URL:
#   bench/app/chat/serve.sh PORT STATE_DIR PROVIDER_URL [doemu dev options...]
# doemu dev has no --var, so this writes a copy of wrangler.toml next to STATE_DIR with the
# address filled in (main made absolute) and serves that. exec keeps doemu in the caller's
# process group.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
port="${1:?port}"
state="$(realpath -m "${2:?state dir}")"
provider="${3:?provider url}"
shift 3
mkdir -p "$state"
config="$state.wrangler.toml"
sed -e "s|^main = \"src/entry.py\"|main = \"$here/src/entry.py\"|" \
  -e "s|^PROVIDER_URL = .*|PROVIDER_URL = \"$provider\"|" "$here/wrangler.toml" > "$config"
exec "$repo/.venv/bin/doemu" dev --config "$config" --port "$port" --persist-to "$state" \
  --log-level warning "$@"
