// The JavaScript side of e2e/test_chat_differential.py: Cloudflare's published AIChatAgent
// (npm @cloudflare/ai-chat 0.12.2 over agents 0.32.0) answering with the AI SDK's streamText from
// an OpenAI-compatible provider at env.PROVIDER_URL — the documented way to write a chat agent in
// JavaScript. DiffChat keeps the package's defaults; WatchedChat adds a 1 s stall watchdog and at
// most 3 recovery attempts (the Python agents of e2e/apps/chat_differential are the same two).
// The test bundles this file with esbuild (see README.md) and serves it on the pinned workerd.
import { routeAgentRequest } from "agents";
import { AIChatAgent } from "@cloudflare/ai-chat";
import { convertToModelMessages, jsonSchema, streamText, tool } from "ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";

export class DiffChat extends AIChatAgent {
  async onChatMessage(_onFinish, options) {
    const provider = createOpenAICompatible({
      name: "fake",
      baseURL: this.env.PROVIDER_URL,
      apiKey: this.env.PROVIDER_KEY,
    });
    const result = streamText({
      model: provider.chatModel("fake-model"),
      messages: await convertToModelMessages(this.messages),
      abortSignal: options?.abortSignal,
    });
    return result.toUIMessageStreamResponse();
  }
}

export class WatchedChat extends DiffChat {
  chatStreamStallTimeoutMs = 1000;
  chatRecovery = { maxAttempts: 3 };
}

// A server tool behind a person's approval (the AI SDK's `needsApproval`): `refund` POSTs to the
// counter server at env.COUNTER_URL and answers with its count. The Python twin is
// e2e/apps/chat_differential's ApprovalChat.
export class ApprovalChat extends AIChatAgent {
  async onChatMessage(_onFinish, options) {
    const env = this.env;
    const provider = createOpenAICompatible({
      name: "fake",
      baseURL: env.PROVIDER_URL,
      apiKey: env.PROVIDER_KEY,
    });
    const refund = tool({
      description: "Refund the customer.",
      inputSchema: jsonSchema({ type: "object", properties: { amount: { type: "number" } } }),
      needsApproval: true,
      execute: async (args) => {
        const response = await fetch(`${env.COUNTER_URL}/increment`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(args),
        });
        return { count: (await response.json()).count };
      },
    });
    const result = streamText({
      model: provider.chatModel("fake-model"),
      messages: await convertToModelMessages(this.messages),
      tools: { refund },
      abortSignal: options?.abortSignal,
    });
    return result.toUIMessageStreamResponse();
  }
}

export default {
  async fetch(request, env) {
    return (await routeAgentRequest(request, env)) ?? new Response("not found", { status: 404 });
  },
};
