// A real ACP client (the official TypeScript SDK) driving `reasonix acp`, for
// local/tests/acp_node.rs. It runs one scenario and prints one JSON report on stdout; the
// Rust test asserts on the report and on the files. Any protocol error exits non-zero.
//
//   node drive.mjs <scenario> [arg]      scenarios: edit | cancel | load <session-id> | mcp <script-server>
//                                        | steps <json: [{cwd?, prompt, answer?, elicit?}]> (a session each)
//                                        | prompts <json: [{prompt, answer?, elicit?}]> (one session)
//
// Environment: REASONIX_BIN (the binary), WS (the editor's folder), AGENT_ARGV (the
// arguments, a JSON array, taken from the Zed example in docs/ACP.md), plus whatever the
// agent needs (REASONIX_HOME).

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const [scenario, arg] = process.argv.slice(2);
const bin = process.env.REASONIX_BIN;
const ws = process.env.WS;
const argv = JSON.parse(process.env.AGENT_ARGV || '["acp"]');

const child = spawn(bin, argv, { cwd: ws, stdio: ["pipe", "pipe", "inherit"] });
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

// Everything the agent sent, in arrival order.
const log = [];
let onUpdate = () => {};

const report = { scenario, log };
// The option kind a permission request is answered with (`steps` sets it per step).
let answer = "allow_once";
// The option kind an MCP elicitation is answered with (`steps`: a step's `elicit`).
let elicitAnswer = null;

function brief(u) {
  const b = { kind: u.sessionUpdate };
  if (u.toolCallId) b.id = u.toolCallId;
  if (u.status) b.status = u.status;
  if (u.kind) b.toolKind = u.kind;
  if (u.title) b.title = u.title;
  if (u.content?.text !== undefined) b.text = u.content.text;
  if (Array.isArray(u.content)) b.content = u.content;
  if (u.entries) b.entries = u.entries.map((e) => `${e.status}:${e.content}`);
  if (u.availableCommands) {
    b.commands = u.availableCommands.map((c) => c.name);
    b.described = u.availableCommands.map((c) => [c.name, c.description, c.input?.hint ?? null]);
  }
  if (u.locations) b.locations = u.locations.map((l) => l.path);
  return b;
}

const app = acp
  .client({ name: "reasonix-acp-node-test" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    log.push({ at: "update", session: params.sessionId, ...brief(params.update) });
    onUpdate(params.update);
  })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    log.push({
      at: "permission",
      id: params.toolCall.toolCallId,
      title: params.toolCall.title,
      options: params.options.map((o) => `${o.optionId}:${o.kind}`),
      content: params.toolCall.content,
    });
    // An MCP server's elicitation (titled "MCP server `x` asks: …") gets the step's
    // `elicit` answer when it has one.
    const kind = params.toolCall.title?.startsWith("MCP server") && elicitAnswer ? elicitAnswer : answer;
    const allow = params.options.find((o) => o.kind === kind);
    process.stderr.write(`[drive] permission asked for ${params.toolCall.toolCallId}\n`);
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  });

async function run(ctx) {
  const init = await ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
  });
  report.init = { protocolVersion: init.protocolVersion, agentCapabilities: init.agentCapabilities };
  if (scenario === "edit") {
    const { sessionId } = await ctx.request(acp.methods.agent.session.new, { cwd: ws, mcpServers: [] });
    report.sessionId = sessionId;
    const r = await ctx.request(acp.methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: "text", text: "change a.txt" }],
    });
    report.stopReason = r.stopReason;
  } else if (scenario === "mcp") {
    // An editor-provided stdio MCP server (arg: the script server's path) and an HTTP one,
    // which is declined with a notice.
    const { sessionId } = await ctx.request(acp.methods.agent.session.new, {
      cwd: ws,
      mcpServers: [
        { name: "ed", command: process.execPath, args: [arg, "ed"], env: [{ name: "MCP_STARTS_LOG", value: `${ws}/../ed-starts.log` }] },
        { type: "http", name: "web", url: "http://127.0.0.1:9/mcp", headers: [] },
      ],
    });
    report.sessionId = sessionId;
    const r = await ctx.request(acp.methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: "text", text: "say hello through the editor's server" }],
    });
    report.stopReason = r.stopReason;
  } else if (scenario === "cancel") {
    const { sessionId } = await ctx.request(acp.methods.agent.session.new, { cwd: ws, mcpServers: [] });
    report.sessionId = sessionId;
    let cancelled = false;
    onUpdate = (u) => {
      if (!cancelled && u.sessionUpdate === "agent_message_chunk") {
        cancelled = true;
        log.push({ at: "cancel-sent" });
        ctx.notify(acp.methods.agent.session.cancel, { sessionId });
      }
    };
    const r = await ctx.request(acp.methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: "text", text: "write a long story" }],
    });
    report.stopReason = r.stopReason;
    // The session still works after a cancel.
    onUpdate = () => {};
    const again = await ctx.request(acp.methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: "text", text: "short one" }],
    });
    report.secondStopReason = again.stopReason;
  } else if (scenario === "load") {
    await ctx.request(acp.methods.agent.session.load, { sessionId: arg, cwd: ws, mcpServers: [] });
    log.push({ at: "loaded" });
    const r = await ctx.request(acp.methods.agent.session.prompt, {
      sessionId: arg,
      prompt: [{ type: "text", text: "and now?" }],
    });
    report.stopReason = r.stopReason;
    // Errors are JSON-RPC errors, not a dead agent.
    try {
      await ctx.request(acp.methods.agent.session.load, { sessionId: "no-such-session", cwd: ws, mcpServers: [] });
      report.unknownLoad = "accepted";
    } catch (e) {
      report.unknownLoad = { code: e.code, message: e.message, data: e.data };
    }
    try {
      await ctx.request(acp.methods.agent.session.prompt, {
        sessionId: "not-open",
        prompt: [{ type: "text", text: "x" }],
      });
      report.unknownPrompt = "accepted";
    } catch (e) {
      report.unknownPrompt = { code: e.code };
    }
  } else if (scenario === "steps") {
    // One new session per step, in the step's folder (default WS), one prompt each.
    report.stopReasons = [];
    for (const [n, step] of JSON.parse(arg).entries()) {
      answer = step.answer || "allow_once";
      elicitAnswer = step.elicit || null;
      const { sessionId } = await ctx.request(acp.methods.agent.session.new, { cwd: step.cwd || ws, mcpServers: [] });
      log.push({ at: "step", n, session: sessionId });
      const r = await ctx.request(acp.methods.agent.session.prompt, {
        sessionId,
        prompt: [{ type: "text", text: step.prompt }],
      });
      report.stopReasons.push(r.stopReason);
    }
  } else if (scenario === "prompts") {
    // One session, several prompts in it (arg: [{prompt, answer?, elicit?}]).
    const { sessionId } = await ctx.request(acp.methods.agent.session.new, { cwd: ws, mcpServers: [] });
    report.sessionId = sessionId;
    report.stopReasons = [];
    for (const [n, step] of JSON.parse(arg).entries()) {
      answer = step.answer || "allow_once";
      elicitAnswer = step.elicit || null;
      log.push({ at: "step", n });
      const r = await ctx.request(acp.methods.agent.session.prompt, {
        sessionId,
        prompt: [{ type: "text", text: step.prompt }],
      });
      report.stopReasons.push(r.stopReason);
    }
  } else if (scenario === "ssh") {
    const { sessionId } = await ctx.request(acp.methods.agent.session.new, { cwd: ws, mcpServers: [] });
    report.sessionId = sessionId;
    const r = await ctx.request(acp.methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: "text", text: arg || "run the slow command" }],
    });
    report.stopReason = r.stopReason;
  } else if (scenario === "new-fails") {
    try {
      await ctx.request(acp.methods.agent.session.new, { cwd: ws, mcpServers: [] });
      report.newSession = "accepted";
    } catch (e) {
      report.newSession = { code: e.code, message: e.message, data: e.data };
    }
  } else {
    throw new Error(`unknown scenario ${scenario}`);
  }
}

// Closing the agent's stdin is how an editor lets go: the agent must exit on its own.
function close() {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve(child.exitCode);
    const t = setTimeout(() => {
      child.kill("SIGTERM");
      resolve("killed");
    }, 10000);
    child.on("exit", (code) => {
      clearTimeout(t);
      resolve(code);
    });
    child.stdin.end();
  });
}

try {
  await app.connectWith(stream, run);
  report.agentExit = await close();
  process.stdout.write(JSON.stringify(report) + "\n");
  process.exit(0);
} catch (e) {
  process.stderr.write(`ACP client failed: ${e?.stack || e} ${JSON.stringify(e?.data ?? null)}\n`);
  process.stdout.write(JSON.stringify({ ...report, error: String(e?.message || e) }) + "\n");
  child.kill("SIGTERM");
  process.exit(1);
}
