// Writes the planned sessions through OpenClaw's own writers (bench/peer/generator.py plans
// them): upsertSessionEntry and appendSessionTranscriptMessageByIdentity from the public SDK,
// and recordSessionParticipant, which the SDK does not export: it is found by its function
// name in the bundle (file names there are content hashes).
//   node writer.mjs <openclaw package dir> <spec.json>
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [pkg, specPath] = process.argv.slice(2);
const load = (rel) => import(pathToFileURL(join(pkg, rel)).href);

async function findParticipantWriter() {
  const dist = join(pkg, "dist");
  for (const name of readdirSync(dist).filter((n) => n.endsWith(".mjs"))) {
    const text = readFileSync(join(dist, name), "utf8");
    if (!text.includes("function recordSessionParticipant(scope")) continue;
    const alias = /export \{[^}]*\brecordSessionParticipant as (\w+)/.exec(text);
    if (!alias) continue;
    const fn = (await load(join("dist", name)))[alias[1]];
    if (typeof fn === "function") return fn;
  }
  throw new Error("recordSessionParticipant not found in the OpenClaw bundle");
}

const { upsertSessionEntry } = await load("dist/plugin-sdk/session-store-runtime.js");
const { appendSessionTranscriptMessageByIdentity } = await load("dist/plugin-sdk/session-transcript-runtime.js");
const recordSessionParticipant = await findParticipantWriter();

const spec = JSON.parse(readFileSync(specPath, "utf8"));
const agentId = spec.agentId;
let messages = 0;
for (const s of spec.sessions) {
  await upsertSessionEntry({ agentId, sessionKey: s.sessionKey, entry: s.entry });
  for (const message of s.messages) {
    await appendSessionTranscriptMessageByIdentity({ agentId, sessionKey: s.sessionKey, sessionId: s.sessionId, message });
    messages += 1;
  }
  for (const p of s.participants) {
    recordSessionParticipant({ agentId, sessionKey: s.sessionKey }, { identity: p.identity, promptedAt: p.promptedAt, sessionAgentId: agentId });
  }
}
console.log(JSON.stringify({ sessions: spec.sessions.length, messages }));
process.exit(0);
