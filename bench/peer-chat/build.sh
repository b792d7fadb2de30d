#!/usr/bin/env bash
# Bundles worker.src.mjs with the pinned npm packages into worker.mjs (git-ignored), which
# workerd.capnp embeds. bench/run.sh runs it after `npm ci`; quick when worker.mjs is current.
#   bench/peer-chat/build.sh
# Bare workerd has no cloudflare:email and the bundle must not pull MCP OAuth or the AI gateway's
# Vercel auth: those three are aliased to stubs.mjs (paths the chat rows never take); node:*
# modules come from workerd (nodejs_compat is the default from 2026-08-04).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
if [ worker.mjs -nt worker.src.mjs ] && [ worker.mjs -nt package-lock.json ] && [ worker.mjs -nt stubs.mjs ]; then
  exit 0
fi
node_modules/.bin/esbuild worker.src.mjs --bundle --format=esm --platform=neutral \
  --main-fields=module,main --conditions=workerd,worker,import,default \
  --external:cloudflare:workers --external:node:* \
  --alias:cloudflare:email=./stubs.mjs --alias:@vercel/oidc=./stubs.mjs \
  --alias:pkce-challenge=./stubs.mjs \
  --alias:fs=node:fs --alias:os=node:os --alias:path=node:path \
  --log-level=error --outfile=worker.mjs.tmp
mv worker.mjs.tmp worker.mjs
