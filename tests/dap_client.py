"""A small Debug Adapter Protocol client for tests: Content-Length framed JSON over a
debug adapter's stdin/stdout, every wait bounded by a timeout."""
from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Message = dict[str, Any]


class DapError(RuntimeError):
    """The adapter answered a request with success=false, died, or did not answer in time."""


class DapClient:
    """Drive one debug adapter process (e.g. lldb-vscode-14) over stdio."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str] | None = None,
                 cwd: Path | None = None, log: Path | None = None) -> None:
        self._proc = subprocess.Popen(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None, cwd=cwd)
        self._seq = 0
        self._cond = threading.Condition()
        self._write_lock = threading.Lock()
        self.children: list[subprocess.Popen[bytes]] = []   # started for runInTerminal
        self.messages: list[Message] = []          # every message received, in order
        self._closed_reason: str | None = None
        self._stderr: list[bytes] = []
        self._log = log.open("a", encoding="utf-8") if log else None
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()
        self._err_reader = threading.Thread(target=self._drain_stderr, daemon=True)
        self._err_reader.start()

    # -- wire ------------------------------------------------------------------------------
    def _read_loop(self) -> None:
        out = self._proc.stdout
        assert out is not None
        try:
            while True:
                headers: dict[str, str] = {}
                while True:
                    line = out.readline()
                    if not line:
                        raise EOFError("adapter closed its stdout")
                    line = line.strip()
                    if not line:
                        break
                    key, _, value = line.decode("ascii").partition(":")
                    headers[key.strip().lower()] = value.strip()
                length = int(headers["content-length"])
                body = out.read(length)
                if len(body) < length:
                    raise EOFError("adapter closed its stdout mid-message")
                msg = json.loads(body)
                if self._log:
                    self._log.write("<- " + json.dumps(msg) + "\n")
                    self._log.flush()
                with self._cond:
                    self.messages.append(msg)
                    self._cond.notify_all()
                if msg.get("type") == "request" and msg.get("command") == "runInTerminal":
                    self._run_in_terminal(msg)
        except (EOFError, ValueError, KeyError, OSError) as exc:
            with self._cond:
                self._closed_reason = str(exc)
                self._cond.notify_all()

    def _run_in_terminal(self, msg: Message) -> None:
        """Answer the adapter's runInTerminal reverse request as VS Code does: start the
        command (no terminal here) and reply with its process id."""
        args = msg.get("arguments", {})
        env = {**os.environ, **{k: v for k, v in (args.get("env") or {}).items() if v is not None}}
        proc = subprocess.Popen(args["args"], cwd=args.get("cwd") or None, env=env,
                                stdin=subprocess.DEVNULL)
        self.children.append(proc)
        self._send({"seq": 0, "type": "response", "request_seq": msg["seq"], "success": True,
                    "command": "runInTerminal", "body": {"processId": proc.pid}})

    def _drain_stderr(self) -> None:
        err = self._proc.stderr
        assert err is not None
        for chunk in iter(lambda: err.read(4096), b""):
            self._stderr.append(chunk)

    @property
    def stderr(self) -> str:
        """What the adapter wrote to its stderr so far."""
        return b"".join(self._stderr).decode("utf-8", "replace")

    def send_request(self, command: str, arguments: Mapping[str, Any] | None = None) -> int:
        """Send a request; return its seq without waiting for the answer."""
        self._seq += 1
        msg: Message = {"seq": self._seq, "type": "request", "command": command}
        if arguments is not None:
            msg["arguments"] = dict(arguments)
        self._send(msg)
        return self._seq

    def _send(self, msg: Message) -> None:
        body = json.dumps(msg).encode("utf-8")
        stdin = self._proc.stdin
        assert stdin is not None
        with self._write_lock:
            if self._log:
                self._log.write("-> " + json.dumps(msg) + "\n")
                self._log.flush()
            try:
                stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
                stdin.flush()
            except OSError as exc:
                raise DapError(f"{msg.get('command')}: adapter is gone ({exc}); "
                               f"stderr: {self.stderr[-2000:]}") from exc

    # -- waiting ---------------------------------------------------------------------------
    def wait_for(self, predicate: Callable[[Message], bool], timeout: float, what: str,
                 start: int = 0) -> Message:
        """The first message (from index `start`) matching predicate, or DapError on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            i = start
            while True:
                while i < len(self.messages):
                    if predicate(self.messages[i]):
                        return self.messages[i]
                    i += 1
                if self._closed_reason is not None:
                    raise DapError(f"waiting for {what}: {self._closed_reason}; "
                                   f"stderr: {self.stderr[-2000:]}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DapError(f"no {what} within {timeout:.0f}s; last messages: "
                                   f"{self.messages[-5:]}")
                self._cond.wait(left)

    def response(self, seq: int, timeout: float = 30.0) -> Message:
        """The response to request `seq`; DapError if it failed."""
        msg = self.wait_for(lambda m: m.get("type") == "response" and m.get("request_seq") == seq,
                            timeout, f"response to request {seq}")
        if not msg.get("success", False):
            raise DapError(f"{msg.get('command')} failed: {msg.get('message')} {msg.get('body')}")
        return msg

    def request(self, command: str, arguments: Mapping[str, Any] | None = None,
                timeout: float = 30.0) -> Message:
        """Send a request and return its (successful) response."""
        return self.response(self.send_request(command, arguments), timeout)

    def event(self, name: str, timeout: float = 30.0, start: int = 0,
              where: Callable[[Message], bool] = lambda m: True) -> Message:
        """The first event called `name` (from message index `start`) for which `where` holds."""
        return self.wait_for(lambda m: m.get("type") == "event" and m.get("event") == name
                             and where(m), timeout, f"{name!r} event", start)

    def output(self) -> str:
        """All text of 'output' events so far."""
        return "".join(m.get("body", {}).get("output", "") for m in self.messages
                       if m.get("type") == "event" and m.get("event") == "output")

    # -- lifetime --------------------------------------------------------------------------
    def close(self, timeout: float = 10.0) -> None:
        """Disconnect (terminating the debuggee) and make sure the adapter is gone."""
        if self._proc.poll() is None:
            try:
                seq = self.send_request("disconnect", {"terminateDebuggee": True})
                self.wait_for(lambda m: m.get("type") == "response" and m.get("request_seq") == seq,
                              timeout, "disconnect response")
            except DapError:
                pass
            try:
                if self._proc.stdin:
                    self._proc.stdin.close()
                self._proc.wait(timeout)
            except (subprocess.TimeoutExpired, OSError):
                self._proc.kill()
                self._proc.wait(timeout)
        for child in self.children:
            if child.poll() is None:
                child.kill()
            child.wait(timeout)
        if self._log:
            self._log.close()
            self._log = None

    def __enter__(self) -> DapClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def env_list_to_dict(entries: Sequence[str] | Mapping[str, str]) -> dict[str, str]:
    """A launch config's env (lldb-vscode's ["K=V"] list or a dict) as a dict."""
    if isinstance(entries, Mapping):
        return dict(entries)
    return dict(e.split("=", 1) for e in entries)



@dataclass
class Stop:
    """Where a launch stopped: the stopped event body, the stack, frame 0's first scope."""
    reason: str
    frames: list[Message]
    variables: dict[str, str]
    output: str
    seconds: float                  # from starting the adapter to the 'stopped' event
    locals_seconds: float = 0.0     # ... to the answer of frame 0's variables (the Locals pane)


def stop_in_function(config: Mapping[str, Any], function: str, timeout: float = 90.0,
                     log: Path | None = None) -> Stop:
    """Start config['debugAdapterExecutable'], send exactly `config` as its request (launch
    or attach), break on `function` (initialize → launch|attach → setFunctionBreakpoints →
    configurationDone → stopped → stackTrace → scopes → variables)."""
    return debug_until_stop(
        [config["debugAdapterExecutable"]], config,
        lambda c: c.request("setFunctionBreakpoints", {"breakpoints": [{"name": function}]}),
        timeout, log)


def stop_at_line(adapter: Sequence[str], config: Mapping[str, Any], source: Path, line: int,
                 timeout: float = 90.0, log: Path | None = None) -> Stop:
    """Like stop_in_function, with a source breakpoint (setBreakpoints) at source:line."""
    return debug_until_stop(
        adapter, config,
        lambda c: c.request("setBreakpoints", {"source": {"path": str(source)},
                                               "breakpoints": [{"line": line}]}),
        timeout, log)


def debug_until_stop(adapter: Sequence[str], config: Mapping[str, Any],
                     set_breakpoints: Callable[[DapClient], Any], timeout: float = 90.0,
                     log: Path | None = None) -> Stop:
    """The DAP sequence of a VS Code session up to the first stop."""
    t0 = time.monotonic()
    with DapClient(adapter, log=log) as c:
        c.request("initialize", {"clientID": "vscode", "adapterID": config["type"],
                                 "linesStartAt1": True, "columnsStartAt1": True,
                                 "pathFormat": "path", "supportsRunInTerminalRequest": True})
        launch = c.send_request(config["request"], config)
        c.event("initialized", timeout)
        set_breakpoints(c)
        c.request("configurationDone")
        c.response(launch, timeout)
        ev = c.wait_for(lambda m: m.get("type") == "event" and m.get("event") in ("stopped", "exited"),
                        timeout, "'stopped' event")
        seconds = time.monotonic() - t0
        if ev["event"] == "exited":
            time.sleep(0.2)
            raise DapError(f"the program exited without stopping: {c.output()[-3000:]}")
        thread = ev["body"]["threadId"]
        frames = c.request("stackTrace", {"threadId": thread, "startFrame": 0,
                                          "levels": 20})["body"]["stackFrames"]
        scopes = c.request("scopes", {"frameId": frames[0]["id"]})["body"]["scopes"]
        variables = {}
        if scopes and scopes[0]["variablesReference"]:
            body = c.request("variables", {"variablesReference": scopes[0]["variablesReference"]})
            variables = {v["name"]: v["value"] for v in body["body"]["variables"]}
        return Stop(ev["body"].get("reason", ""), frames, variables, c.output(), seconds,
                    time.monotonic() - t0)


def run_to_exit(config: Mapping[str, Any], timeout: float = 90.0) -> tuple[int, str]:
    """Launch `config` without breakpoints; (exit code, the program's output)."""
    with DapClient([config["debugAdapterExecutable"]]) as c:
        c.request("initialize", {"clientID": "orch-tests", "adapterID": config["type"]})
        launch = c.send_request("launch", config)
        c.event("initialized", timeout)
        c.request("configurationDone")
        c.response(launch, timeout)
        ev = c.event("exited", timeout)
        c.event("terminated", timeout)
        return int(ev["body"]["exitCode"]), c.output()
