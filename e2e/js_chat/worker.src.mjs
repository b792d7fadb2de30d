// The JavaScript side of e2e/test_chat_differential.py: Cloudflare's published AIChatAgent
// (npm @cloudflare/ai-chat 0.12.2 over agents 0.32.0) answering with the AI SDK's streamText from
// an OpenAI-compatible provider at env.PROVIDER_URL — the documented way to write a chat agent in
// JavaScript. DiffChat keeps the package's defaults; WatchedChat adds a 1 s stall watchdog and at
// most 3 recovery attempts (the Python agents of e2e/apps/chat_differential are the same two).
// The test bundles this file with esbuild (see README.md) and serves it on the pinned workerd.
import { routeAgentRequest } from "agents";
import { AIChatAgent } from "@cloudflare/ai-chat";
import { convertToModelMessages, streamText } from "ai";
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

export default {
  async fetch(request, env) {
    return (await routeAgentRequest(request, env)) ?? new Response("not found", { status: 404 });
  },
};
