// A stand-in for an agent CLI in an mcp column (TestMCPColumnCalls): it
// finds the MCP server SharedOS wrote into its --mcp-config file (Claude
// Code's shape), initializes a 2025-11-25 session with the header given
// there, and reads /public/a.txt and /private/a.txt with files.read, as a
// model following the demo manifest's prompt would.
import fs from 'node:fs';

const cfgPath = process.argv[process.argv.indexOf('--mcp-config') + 1];
const server = Object.values(JSON.parse(fs.readFileSync(cfgPath, 'utf8')).mcpServers)[0];
let session = '';
let id = 0;
async function rpc(method, params, notify = false) {
  const headers = { ...server.headers, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
    'MCP-Protocol-Version': '2025-11-25' };
  if (session) headers['Mcp-Session-Id'] = session;
  const body = { jsonrpc: '2.0', method, params };
  if (!notify) body.id = ++id;
  const res = await fetch(server.url, { method: 'POST', headers, body: JSON.stringify(body) });
  session = res.headers.get('mcp-session-id') || session;
  const text = await res.text();
  if (!res.ok) throw new Error(`${method}: HTTP ${res.status} ${text}`);
  return text;
}
await rpc('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'standin', version: '1' } });
await rpc('notifications/initialized', {}, true);
for (const path of ['/public/a.txt', '/private/a.txt']) {
  console.log(await rpc('tools/call', { name: 'files.read', arguments: { path } }));
}
