#!/usr/bin/env python3
"""Writes the hand-made seed files of fuzz/corpus/<target>/seed-*.

Run by hand after changing a seed (`python3 fuzz/make_seeds.py`); libFuzzer's own finds
and every crash input are committed next to the seeds and never regenerated.
"""
import json
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def frame(kind, seq, ack, payload=b""):
    if isinstance(payload, str):
        payload = payload.encode()
    body = struct.pack(">BQQ", kind, seq, ack) + payload
    return struct.pack(">I", len(body)) + body


HELLO = json.dumps({"protocol": 2, "build_id": "b1", "client_id": "c1", "resume": None})
HELLO_RESUME = json.dumps(
    {"protocol": 2, "build_id": "b1", "client_id": "c1", "resume": {"link_id": "L", "received": 3}}
)
WELCOME = json.dumps(
    {"protocol": 2, "build_id": "fuzz", "link_id": "L1", "resumed": False, "received": 0,
     "resume_refused": None}
)
ENVS = [
    {"t": "request", "id": 1, "body": {"m": "status"}},
    {"t": "request", "id": 2, "body": {"m": "list_sessions"}},
    {"t": "request", "id": 3, "body": {"m": "open_session", "session": None, "new": True,
                                       "since": 0, "read_only": False, "takeover": False,
                                       "settings": {}}},
    {"t": "request", "id": 4, "body": {"m": "submit_turn", "request_id": "r1", "text": "hi"}},
    {"t": "response", "id": 9, "result": {"Ok": {"r": "ok"}}},
    {"t": "response", "id": 9, "result": {"Err": {"code": "bad_request", "message": "no"}}},
    {"t": "notify", "body": {"n": "tool_progress", "call_id": "c", "message": "m"}},
    {"t": "notify", "body": {"n": "state", "state": "idle", "detail": None}},
    {"t": "channel", "c": "open", "ch": 2, "window": 4096, "open": {"k": "mcp", "server": "s"}},
    {"t": "channel", "c": "accept", "ch": 2, "window": 4096, "accepted": {"k": "mcp"}},
    {"t": "channel", "c": "data", "ch": 2, "data": {"d": "line", "line": "{}", "more": True}},
    {"t": "channel", "c": "data", "ch": 1, "data": {"d": "pty", "p": "output", "offset": 0,
                                                    "data": "aGk="}},
    {"t": "channel", "c": "credit", "ch": 2, "bytes": 2048},
    {"t": "channel", "c": "close", "ch": 2, "reason": "exit 0"},
    {"t": "channel", "c": "cancel", "ch": 1, "reason": "gone"},
]

seeds = {}

# frame: byte 0 = chunk size, then frames.
data = b"".join(frame(3, i + 1, 0, json.dumps(e)) for i, e in enumerate(ENVS))
seeds["frame"] = {
    "data": b"\x07" + data,
    "control": b"\x01" + frame(4, 0, 3) + frame(5, 0, 1) + frame(6, 0, 2) + frame(7, 0, 0, "bye"),
    "hello": b"\x03" + frame(1, 0, 0, HELLO) + frame(2, 0, 0, WELCOME),
    "oversized": b"\x02" + b"\x00\x00\x10\x01" + b"\x03" * 40,
    "short": b"\x00" + b"\x00\x00\x00\x05\x03\x00",
    "unknown-kind": b"\x05" + frame(0xEE, 0, 0, "x"),
    "truncated": b"\x04" + frame(3, 1, 0, json.dumps(ENVS[0]))[:-5],
}

# link: byte 0 = peer_received % 5, then the inbound stream.
seeds["link"] = {
    "in-order": b"\x00" + data,
    "acks": b"\x02" + frame(4, 0, 1) + frame(4, 0, 3) + frame(3, 1, 2, json.dumps(ENVS[6])),
    "ack-beyond": b"\x00" + frame(4, 0, 99),
    "gap": b"\x01" + frame(3, 1, 0, json.dumps(ENVS[0])) + frame(3, 5, 0, json.dumps(ENVS[1])),
    "repeat": b"\x00" + frame(3, 1, 0, json.dumps(ENVS[0])) * 3,
    "ping-close": b"\x03" + frame(5, 0, 0) + frame(7, 0, 0, "done"),
    "junk-payload": b"\x00" + frame(3, 1, 0, "{not json") + frame(3, 2, 0, "[]"),
    "hello-mid-link": b"\x00" + frame(1, 0, 0, HELLO),
}

# preamble: what a client reads from the host: noise, the magic line, then a welcome.
welcome = frame(2, 0, 0, WELCOME)
seeds["preamble"] = {
    "clean": b"REASONIX-LINK/2 fuzz\n" + welcome,
    "banner": b"Welcome to the box!\r\nLast login: never\nREASONIX-LINK/2 fuzz\n" + welcome,
    "same-line": b"motd without newline REASONIX-LINK/2 fuzz\n" + welcome,
    "partial-magic": b"REASONIX-LIN REASONIX-LINK/ REASONIX-LINK/2 fuzz\n" + welcome,
    "other-version": b"REASONIX-LINK/7 fuzz\n",
    "no-version": b"REASONIX-LINK/x\n",
    "long-line": b"REASONIX-LINK/2 " + b"b" * 400 + b"\n",
    "close": b"REASONIX-LINK/2 fuzz\n" + frame(7, 0, 0, "another build is running"),
    "other-build": b"REASONIX-LINK/2 zzz\n" + frame(2, 0, 0, WELCOME.replace("fuzz", "zzz")),
    "garbage": bytes(range(256)) * 20,
}

# handshake: what the daemon reads from a new client.
seeds["handshake"] = {
    "hello": frame(1, 0, 0, HELLO),
    "resume": frame(1, 0, 0, HELLO_RESUME),
    "old-protocol": frame(1, 0, 0, HELLO.replace('"protocol": 2', '"protocol": 1')),
    "data-first": frame(3, 1, 0, json.dumps(ENVS[0])),
    "bad-json": frame(1, 0, 0, "{\"protocol\": 1,"),
    "huge-len": b"\x7f\xff\xff\xff\x01",
    "empty": b"",
}

# mcp_lines: the server's lines; `>>>` waits for the client's next message.
init = {"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-06-18",
                                              "serverInfo": {"name": "s", "version": "1"},
                                              "capabilities": {}}}
tools = {"jsonrpc": "2.0", "id": 2, "result": {"tools": [
    {"name": "t", "description": "d", "inputSchema": {"type": "object"},
     "annotations": {"readOnlyHint": True}},
    {"description": "nameless"}], "nextCursor": ""}}
call = {"jsonrpc": "2.0", "id": 3, "result": {"content": [
    {"type": "text", "text": "hello"}, {"type": "image", "mimeType": "image/png", "data": "AAAA"},
    {"type": "resource", "resource": {"uri": "file:///x", "text": "t"}},
    {"type": "resource_link", "uri": "file:///y", "name": "y"}], "isError": False}}
progress = {"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": "reasonix-3", "progress": 1, "total": 2, "message": "half"}}
ping = {"jsonrpc": "2.0", "id": "p1", "method": "ping"}
sample = {"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage", "params": {}}
L = lambda *xs: ("\n".join(x if isinstance(x, str) else json.dumps(x) for x in xs) + "\n").encode()
seeds["mcp_lines"] = {
    "happy": L(">>>", init, ">>>", ">>>", tools, ">>>", progress, call),
    "noise": L("starting server...", ">>>", "{", init, ">>>", ">>>", "[]", "42", tools, ">>>", call),
    "batch": L(">>>", [init], ">>>", ">>>", [tools, ping], ">>>", [progress, call]),
    "errors": L(">>>", init, ">>>", ">>>", {"jsonrpc": "2.0", "id": 2, "error": {"code": -1, "message": "no"}},
                ">>>", {"jsonrpc": "2.0", "id": 3, "error": {}}),
    "server-requests": L(ping, sample, ">>>", init, ">>>", ">>>", tools, ">>>", call),
    "bad-ids": L(">>>", {"jsonrpc": "2.0", "id": -1, "result": {}}, {"jsonrpc": "2.0", "id": 1.5, "result": {}},
                 {"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 5}}),
    "cursor-loop": L(">>>", init, ">>>", ">>>", {"jsonrpc": "2.0", "id": 2, "result": {"tools": [], "nextCursor": "a"}},
                     ">>>", {"jsonrpc": "2.0", "id": 3, "result": {"tools": [], "nextCursor": "a"}}),
}

# ssh_config: line 1 = destination (and -o option / ProxyJump value), rest = the config.
seeds["ssh_config"] = {
    "basic": b"fuzzhost\nHost fuzzhost\n  HostName 10.9.9.9\n  User alice\n  Port 2222\n  IdentityFile ~/.ssh/id_x\n",
    "match": b"bob@fuzzhost:ws\nMatch host fuzzhost user bob\n  Port 2200\nMatch all\n  ServerAliveInterval 5\n",
    "jump": b"j1,u@j2:2022\nHost *\n  ProxyJump u@jump:2222,other\nHost jump\n  HostName 1.2.3.4\n",
    "include": b"Host inc\n User inc\nInclude conf.d/*.conf\nHost fuzzhost\n  User late\n",
    "tokens": b"ssh://u@[::1]:2022/~/p\nHost *\n  IdentityFile %d/.ssh/%r@%h:%p\n  UserKnownHostsFile ~/kh %d/kh2\n",
    "options": b"StrictHostKeyChecking=accept-new\nHost=fuzzhost\nConnectTimeout=7\nServerAliveCountMax 0\nPreferredAuthentications password,publickey\n",
    "quotes": b"\"fuzz host\"\nHost \"fuzzhost\" !bad *.example\n  User \"a b\"\n  IdentityFile \"~/my key\"\n",
    "negated": b"-oops\nHost !fuzzhost *\n  Port 99999\nHost fuzzhost\n  BatchMode maybe\n",
}

ED = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB8wPjY5sO8krVL7et0fc9NJTKhQIMvNbes9MupDfQr0"
EC = ("ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBEOPNCdXAlTPE0sAi4JWLlyaD"
      "+qEVbjBY/LsrciKf+GIfmEN76tXxXSRh+KlC2b4H9w5CxCj55I6C40GU1EcMsQ=")
seeds["known_hosts"] = {
    "plain": f"fuzzhost {ED}\n10.1.2.3 {EC}\n".encode(),
    "port": f"[fuzzhost]:2222,fuzzhost {ED} comment\n".encode(),
    "hashed": f"|1|dGVzdHNhbHR0ZXN0c2FsdHQ=|q0m3cKGAbBrQ3Zp/9o6WqfVpI6Y= {ED}\n".encode(),
    "markers": f"@revoked * {EC}\n@cert-authority *.example {ED}\n@other x {ED}\n".encode(),
    "patterns": f"!fuzzhost,*,10.1.2.? {ED}\n# comment\n\n   \n{'x' * 300} {ED}\n".encode(),
    "broken": f"fuzzhost ssh-ed25519 AAAA\n|1|!!|!! {ED}\nfuzzhost\n@revoked\n".encode(),
}

seeds["policy_rules"] = {
    "basic": b"Bash(git status:*)\nRead(src/**)\nBash(rm -rf:*)\n",
    "globs": b"Edit(**/*.rs)\nmcp__srv__*\nWrite(./out/*)\nRead(~/secret)\nBash(ls *)\nEdit\n",
    "bad": b"Bash(\nBash(:*)\n(x)\nRead()\nBash(a:*\n)\n",
    "weird": b"bash(GIT  push --force:*)\nRead(/abs/[a-z]*.txt)\nGlob({a,b})\nBash(echo \"x y\":*)\n",
    "paths": b"Read(../../etc/passwd)\nEdit(//double)\nWrite(C:\\\\x)\nRead(*)\n",
}

seeds["bash_split"] = {
    "simple": b"git status",
    "compound": b"ls -la && cat README.md | grep x; echo done || true",
    "quotes": b"echo 'a; b' \"c && d\" \\; e",
    "subst": b"echo $(rm -rf /) `id` <(cat x) ${HOME:-/}",
    "redirect": b"cat a > /dev/null 2>&1; echo x >> out.txt; cmd 2>err",
    "subshell": b"(cd x && make) & { echo a; }",
    "heredoc": b"cat <<EOF\nhello; rm -rf /\nEOF\n",
    "unterminated": b"echo \"unterminated 'quote $(",
    "wrappers": b"sudo env FOO=1 timeout 5 nice -n 5 git push --force origin main",
}

sse_body = "".join([
    ": keep-alive\n\n",
    "data: " + json.dumps({"model": "m", "choices": [{"delta": {"content": "Hel"}}]}) + "\n\n",
    "data: " + json.dumps({"choices": [{"delta": {"reasoning_content": "think"}}]}) + "\r\n\r\n",
    "data: " + json.dumps({"choices": [{"delta": {"content": "lo <think>x</think> wörld"}}]}) + "\n\n",
    "data: " + json.dumps({"choices": [{"delta": {"tool_calls": [
        {"index": 0, "id": "call_1", "function": {"name": "bash", "arguments": "{\"comm"}}]}}]}) + "\n\n",
    "data: " + json.dumps({"choices": [{"delta": {"tool_calls": [
        {"index": 0, "function": {"arguments": "and\":\"ls\"}"}}]}, "finish_reason": "tool_calls"}]}) + "\n\n",
    "data: " + json.dumps({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 2,
                                                    "prompt_cache_hit_tokens": 8,
                                                    "prompt_cache_miss_tokens": 2}}) + "\n\n",
    "data: [DONE]\n\n",
])
seeds["sse"] = {
    "full": b"\x05" + sse_body.encode(),
    "error": b"\x03" + b"data: {\"error\":{\"message\":\"Rate limit, overloaded\"}}\n\n",
    "cut": b"\x01" + b"data: {\"choices\":[{\"delta\":{\"content\":\"\xc3\xa4\xe2\x82\xac\"}}]}\n\ndata: {\"cho",
    "junk": b"\x02" + b"event: x\nid: 1\nretry: 5\n{\"error\":\"not sse\"}\ndata:\ndata: [DONE]",
    "tool-no-id": b"\x04" + ("data: " + json.dumps({"choices": [{"delta": {"tool_calls": [
        {"index": 3, "function": {"name": "x", "arguments": "{}"}}]}, "finish_reason": "stop"}]}) + "\n").encode(),
}

for target, files in seeds.items():
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    for name, content in files.items():
        with open(os.path.join(d, "seed-" + name), "wb") as f:
            f.write(content)
print("wrote", sum(len(f) for f in seeds.values()), "seeds for", len(seeds), "targets")
