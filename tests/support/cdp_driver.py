#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Drives a headless Chromium over the DevTools protocol for a test, with Python's stdlib only.

Usage: cdp_driver.py CHROMIUM WORKDIR

Starts CHROMIUM headless with a fresh profile in WORKDIR, then reads commands from stdin, one
JSON object a line, and answers each with one JSON line on stdout:

  {"cmd": "open", "url": U}                       -> {"ok": true}  (loads U, waits for load)
  {"cmd": "wait", "expr": JS, "timeout_ms": N}    -> {"ok": B, "value": V}: evaluates JS until
                                                     truthy (every 50 ms) or N ms passed
  {"cmd": "eval", "expr": JS}                     -> {"ok": true, "value": V}
  {"cmd": "errors", "clear": B}                   -> {"ok": true, "errors": [text...]}: console
                                                     errors and warnings, uncaught exceptions,
                                                     and browser log errors (failed loads, CSP
                                                     violations) since the start or the last
                                                     clear (B true: forget them after)
  {"cmd": "requests"}                             -> {"ok": true, "requests": [{"url","headers"}]}
  {"cmd": "screenshot", "path": P, "width": W}    -> {"ok": true}: the whole page as PNG
  {"cmd": "quit"}                                 -> {"ok": true}, then exits

Any failure answers {"ok": false, "error": text}. Chromium's own output goes to
WORKDIR/chromium.log.
"""

import base64
import json
import os
import socket
import struct
import subprocess
import sys
import time
import urllib.request


class WebSocket:
    """A minimal RFC 6455 client: text frames out (masked), text frames in."""

    def __init__(self, url):
        assert url.startswith("ws://")
        rest = url[len("ws://"):]
        hostport, path = rest.split("/", 1)
        host, port = hostport.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        self.sock.sendall(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise RuntimeError("the DevTools socket closed during the handshake")
            head += chunk
        head, self.buffer = head.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise RuntimeError("DevTools refused the WebSocket: " + head.decode(errors="replace"))

    def _read(self, n):
        while len(self.buffer) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buffer)))
            if not chunk:
                raise RuntimeError("the DevTools socket closed")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def send(self, text):
        data = text.encode()
        header = bytearray([0x81])
        if len(data) < 126:
            header.append(0x80 | len(data))
        elif len(data) < 65536:
            header.append(0x80 | 126)
            header += struct.pack(">H", len(data))
        else:
            header.append(0x80 | 127)
            header += struct.pack(">Q", len(data))
        mask = os.urandom(4)
        header += mask
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.sendall(bytes(header) + masked)

    def recv(self, timeout):
        """One message (fragments joined), or None when nothing came within timeout."""
        self.sock.settimeout(timeout)
        try:
            message = b""
            while True:
                b0, b1 = self._read(2)
                opcode = b0 & 0x0F
                length = b1 & 0x7F
                if length == 126:
                    length = struct.unpack(">H", self._read(2))[0]
                elif length == 127:
                    length = struct.unpack(">Q", self._read(8))[0]
                if b1 & 0x80:
                    mask = self._read(4)
                    payload = bytes(b ^ mask[i % 4] for i, b in enumerate(self._read(length)))
                else:
                    payload = self._read(length)
                if opcode == 0x8:
                    raise RuntimeError("DevTools closed the WebSocket")
                if opcode in (0x9, 0xA):  # ping, pong: not sent by DevTools; ignored
                    continue
                message += payload
                if b0 & 0x80:
                    return message.decode()
        except socket.timeout:
            return None
        finally:
            self.sock.settimeout(30)


class Browser:
    def __init__(self, chromium, workdir):
        profile = os.path.join(workdir, "profile")
        os.makedirs(profile, exist_ok=True)
        args = [
            chromium, "--headless", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
            "--disable-extensions", "--disable-background-networking", "--disable-sync",
            "--disable-component-update", "--disable-default-apps", "--mute-audio",
            "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
            "--window-size=1280,900", f"--user-data-dir={profile}", "about:blank",
        ]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium's sandbox refuses to run as root
        self.log = open(os.path.join(workdir, "chromium.log"), "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        port_file = os.path.join(profile, "DevToolsActivePort")
        deadline = time.monotonic() + 60
        port = None
        while port is None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode}; see chromium.log")
            if time.monotonic() > deadline:
                raise RuntimeError("chromium did not open its DevTools port within 60 s")
            try:
                with open(port_file) as f:
                    first = f.readline().strip()
                    port = int(first) if first else None
            except (FileNotFoundError, ValueError):
                pass
            if port is None:
                time.sleep(0.05)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as r:
            targets = json.load(r)
        page = next(t for t in targets if t.get("type") == "page")
        self.ws = WebSocket(page["webSocketDebuggerUrl"])
        self.next_id = 0
        self.errors = []
        self.requests = []
        self.loaded = False
        for method in ("Runtime.enable", "Log.enable", "Page.enable", "Network.enable"):
            self.call(method)

    def _event(self, m):
        method = m.get("method")
        p = m.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            self.errors.append(f"console.{p['type']}: {text}")
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            desc = d.get("exception", {}).get("description") or d.get("text")
            self.errors.append(f"exception: {desc} at {d.get('url')}:{d.get('lineNumber')}")
        elif method == "Log.entryAdded":
            e = p.get("entry", {})
            if e.get("level") in ("error", "warning"):
                self.errors.append(f"log {e.get('source')} {e.get('level')}: {e.get('text')} {e.get('url', '')}")
        elif method == "Network.requestWillBeSent":
            r = p.get("request", {})
            self.requests.append({"url": r.get("url"), "headers": r.get("headers", {})})
        elif method == "Page.loadEventFired":
            self.loaded = True

    def call(self, method, params=None, timeout=30):
        self.next_id += 1
        mid = self.next_id
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"{method}: no answer within {timeout} s")
            raw = self.ws.recv(left)
            if raw is None:
                continue
            m = json.loads(raw)
            if m.get("id") == mid:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self._event(m)

    def pump(self, seconds):
        """Handles events for `seconds`."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            raw = self.ws.recv(left)
            if raw is not None:
                self._event(json.loads(raw))

    def evaluate(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True})
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise RuntimeError("evaluate: " + (d.get("exception", {}).get("description") or d.get("text", "")))
        return r.get("result", {}).get("value")

    def open(self, url):
        self.loaded = False
        self.call("Page.navigate", {"url": url})
        deadline = time.monotonic() + 30
        while not self.loaded:
            if time.monotonic() > deadline:
                raise RuntimeError("the page did not load within 30 s")
            self.pump(0.05)

    def wait(self, expr, timeout_ms):
        deadline = time.monotonic() + timeout_ms / 1000
        value = None
        while True:
            value = self.evaluate(expr)
            if value:
                return True, value
            if time.monotonic() > deadline:
                return False, value
            self.pump(0.05)

    def screenshot(self, path, width):
        height = int(self.evaluate("Math.ceil(document.documentElement.scrollHeight)") or 900)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        self.pump(0.2)
        shot = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))

    def quit(self):
        try:
            self.call("Browser.close", timeout=5)
        except Exception:  # noqa: BLE001 - closing anyway
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def main():
    chromium, workdir = sys.argv[1], sys.argv[2]
    try:
        browser = Browser(chromium, workdir)
    except Exception as e:  # noqa: BLE001 - reported to the test
        print(json.dumps({"ok": False, "error": f"starting chromium: {e}"}), flush=True)
        return 1
    print(json.dumps({"ok": True, "ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            c = json.loads(line)
            cmd = c.get("cmd")
            out = {"ok": True}
            if cmd == "open":
                browser.open(c["url"])
            elif cmd == "wait":
                out["ok"], out["value"] = browser.wait(c["expr"], c.get("timeout_ms", 10000))
            elif cmd == "eval":
                out["value"] = browser.evaluate(c["expr"])
            elif cmd == "errors":
                browser.pump(0.05)
                out["errors"] = browser.errors
                if c.get("clear"):
                    browser.errors = []
            elif cmd == "requests":
                out["requests"] = browser.requests
            elif cmd == "screenshot":
                browser.screenshot(c["path"], c.get("width", 1280))
            elif cmd == "quit":
                browser.quit()
                print(json.dumps(out), flush=True)
                return 0
            else:
                out = {"ok": False, "error": f"unknown command {cmd!r}"}
        except Exception as e:  # noqa: BLE001 - reported to the test
            out = {"ok": False, "error": str(e)}
        print(json.dumps(out), flush=True)
    browser.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
