// Modules the bundle references but bare workerd does not have, on paths the chat rows never take:
// cloudflare:email (Agent's email routing), @vercel/oidc (the AI gateway's Vercel auth),
// pkce-challenge (MCP OAuth). build.sh aliases each of them to this file.
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
