// Modules the bundle names but bare workerd lacks, on paths a chat turn never takes: the agent's
// email routing (cloudflare:email), the AI gateway's Vercel auth (@vercel/oidc) and MCP OAuth
// (pkce-challenge). The test's esbuild call aliases each of them to this file.
export class EmailMessage {
  constructor() {
    throw new Error("cloudflare:email is not available on bare workerd");
  }
}
export function getContext() {
  return {};
}
export async function getVercelOidcToken() {
  throw new Error("@vercel/oidc is not available in this bundle");
}
export default async function pkceChallenge() {
  throw new Error("pkce-challenge is not available in this bundle");
}
