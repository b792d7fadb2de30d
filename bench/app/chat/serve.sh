#!/usr/bin/env bash
# Serves the chat agent on doemu with the fake provider's address as env.OPENAI_BASE_URL:
#   bench/app/chat/serve.sh PORT STATE_DIR PROVIDER_URL [doemu dev options...]
# (--var OPENAI_BASE_URL:PROVIDER_URL --var OPENAI_API_KEY:bench). exec keeps doemu in the
# caller's process group.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
port="${1:?port}"
state="$(realpath -m "${2:?state dir}")"
provider="${3:?provider url}"
shift 3
mkdir -p "$state"
exec "$repo/.venv/bin/doemu" dev --config "$here/wrangler.toml" --port "$port" --persist-to "$state" \
  --log-level warning --var "OPENAI_BASE_URL:$provider" --var OPENAI_API_KEY:bench "$@"
