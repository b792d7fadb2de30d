// The chat rows' agent (bench/README.md) for bare workerd: Cloudflare's published AIChatAgent
// (@cloudflare/ai-chat, agents) answering with the AI SDK's streamText from the bench's fake
// OpenAI-compatible provider (bench/fakeprovider.py) at env.PROVIDER_URL. The same agent as
// bench/app/chat/src/entry.py. build.sh bundles it (with its npm dependencies) into worker.mjs.
import { routeAgentRequest } from "agents";
import { AIChatAgent } from "@cloudflare/ai-chat";
import { convertToModelMessages, streamText } from "ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";

export class ChatBench extends AIChatAgent {
  async onChatMessage(onFinish, options) {
    const provider = createOpenAICompatible({ name: "fake", baseURL: this.env.PROVIDER_URL });
    const result = streamText({
      model: provider.chatModel("fake"),
      messages: await convertToModelMessages(this.messages),
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
