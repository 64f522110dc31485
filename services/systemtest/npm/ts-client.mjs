// ts-client.mjs: the official TypeScript SDK client against one bridge turn.
// Usage: node ts-client.mjs <mcpUrl> <token> '<calls JSON>'
//   calls: [{"name":"files.read","arguments":{...},"progress":false}, ...]
//   and {"prompt":"name","arguments":{...}} (prompts/get) or
//   {"resource":"uri"} (resources/read)
// Prints one JSON object: the negotiated protocol version, the listed tool
// names, the list result's _meta, and each call's {isError, text, meta};
// a prompts/get or resources/read that throws gives {name, error: {code,
// message, data}} as the client surfaced it (an McpError's JSON-RPC
// error, or a transport error's HTTP status with no data).
// Exit code 0 unless the client itself failed (a refusal is a result).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, callsJSON = "[]"] = process.argv.slice(2);
if (!url || !token) {
  console.error("usage: node ts-client.mjs <mcpUrl> <token> '<calls JSON>'");
  process.exit(2);
}

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "sharedos-e2e-ts", version: "1.0.0" });

try {
  await client.connect(transport);
  const listed = await client.listTools();
  const out = {
    protocolVersion: transport.protocolVersion ?? null,
    server: client.getServerVersion() ?? null,
    tools: listed.tools.map((t) => t.name),
    listMeta: listed._meta ?? null,
    calls: [],
  };
  for (const call of JSON.parse(callsJSON)) {
    if (call.prompt !== undefined || call.resource !== undefined) {
      const name = call.prompt ?? call.resource;
      try {
        const res = call.prompt !== undefined
          ? await client.getPrompt({ name, arguments: call.arguments ?? {} })
          : await client.readResource({ uri: name });
        out.calls.push({ name, result: res });
      } catch (err) {
        out.calls.push({ name, error: { code: err?.code ?? null, message: String(err?.message ?? err), data: err?.data ?? null } });
      }
      continue;
    }
    // "progress": true asks for progress notifications and counts them.
    let progress = 0;
    const options = call.progress ? { onprogress: () => { progress++; } } : undefined;
    const res = await client.callTool({ name: call.name, arguments: call.arguments ?? {} }, undefined, options);
    out.calls.push({
      name: call.name,
      isError: res.isError === true,
      text: (res.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join(""),
      meta: res._meta ?? null,
      progress,
    });
  }
  console.log(JSON.stringify(out));
  await client.close();
} catch (err) {
  console.error(`ts-client: ${err?.stack ?? err}`);
  process.exit(1);
}
