"""The Copilot CLI in SDK mode driven with (almost) nothing: the floor of a ``polypilot run``.

``python -I -S _raw_copilot.py CWD MODEL BASE_URL KEY_ENV PROMPT -- CLI_ARGV...``, with the
CLI's environment as its own. It speaks the JSON-RPC the Copilot SDK speaks over the CLI's
stdio (the same flags, requests and parameters, copied from a traced run): ``connect``,
``session.create``, ``session.send``, each permission request approved once, until
``session.idle``; then the SDK's graceful stop (``session.detach``, ``runtime.shutdown``,
stdin closed, the exit awaited). It prints the assistant's messages and exits 0 when the
turn went idle. Standard library only, no ``site``: its own start is ~0.02 s, so its wall
minus the bare ``copilot -p``'s is what the CLI's SDK mode itself costs on the same turn —
no program that drives the CLI through its SDK protocol gets below it. Not a product path:
no leash, no sandbox, no policy (bench/headless_run.py measures it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from typing import IO, Any


def send(pipe: IO[bytes], method: str, params: dict[str, Any]) -> str:
    ident = str(uuid.uuid4())
    body = json.dumps({"jsonrpc": "2.0", "id": ident, "method": method, "params": params}).encode()
    pipe.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    pipe.flush()
    return ident


def receive(pipe: IO[bytes]) -> dict[str, Any]:
    length = 0
    while (line := pipe.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    if not length:
        raise EOFError("the CLI closed its stdout")
    message: dict[str, Any] = json.loads(pipe.read(length))
    return message


def main(argv: list[str]) -> int:
    split = argv.index("--")
    cwd, model, base_url, key_env, prompt = argv[:split]
    cli = [*argv[split + 1 :], "--headless", "--no-auto-update", "--log-level", "info", "--no-auto-login", "--stdio"]
    env = {**os.environ, "COPILOT_RUNTIME_PROCESS_FILE_LOGGING": "1"}
    proc = subprocess.Popen(cli, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    writer, reader = proc.stdin, proc.stdout

    def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
        ident = send(writer, method, params)
        while True:
            message = receive(reader)
            if message.get("id") == ident and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message
            handle(message)

    session_id = str(uuid.uuid4())
    idle: list[bool] = []

    def handle(message: dict[str, Any]) -> None:
        if message.get("method") != "session.event":
            return
        event = message["params"]["event"]
        kind, data = event.get("type"), event.get("data") or {}
        if kind == "assistant.message" and data.get("content"):
            sys.stdout.write(str(data["content"]) + "\n")
        elif kind == "permission.requested":
            result = {"kind": "approve-once"}
            send(
                writer,
                "session.permissions.handlePendingPermissionRequest",
                {"requestId": data["requestId"], "result": result, "sessionId": session_id},
            )
        elif kind == "session.idle":
            idle.append(True)

    call("connect", {"supportedTaskKinds": ["agent", "client", "shell"]})
    call(
        "session.create",
        {
            "model": model,
            "toolFilterPrecedence": "excluded",
            "requestPermission": True,
            "requestElicitation": False,
            "requestExitPlanMode": False,
            "requestAutoModeSwitch": False,
            "workingDirectory": cwd,
            "streaming": True,
            "includeSubAgentStreamingEvents": True,
            "provider": {"type": "openai", "baseUrl": base_url, "apiKey": os.environ[key_env]},
            "envValueMode": "direct",
            "sessionId": session_id,
        },
    )
    call("session.send", {"sessionId": session_id, "prompt": prompt})
    while not idle:
        handle(receive(reader))
    call("session.detach", {"sessionId": session_id})
    call("runtime.shutdown", {})
    writer.close()
    while reader.read(65536):  # the CLI's last output, until it exits
        pass
    return 0 if proc.wait() == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
