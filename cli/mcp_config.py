"""`pai mcp --print-config CLIENT`: the snippet that registers this `pai mcp` with an MCP client. It names the
running `pai` by its absolute path and pins PAI_HOME (absolute), so whichever project folder and minimal
environment a client starts the server in, every client and project shares one memory."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path

from retrieval.db import pai_home

NAME = "pai-brain"  # the server's name in the client's list
# client -> where its snippet goes (printed on stderr beside the snippet)
CLIENTS = {
    "claude-desktop": "merge into claude_desktop_config.json (Settings > Developer > Edit Config), then restart it",
    "claude-code": "run it once: --scope user makes it every project's",
    "cursor": "merge into ~/.cursor/mcp.json (every project) or a project's .cursor/mcp.json",
}


class ConfigError(ValueError):
    """No snippet can be printed; the message is one line for the user."""


def pai_executable() -> Path:
    """The `pai` of the running environment, absolute: beside this interpreter (a venv's bin/, Scripts/), else on
    PATH. Not resolved: a venv's python is a link to the system's, and the venv is what must run."""
    beside = Path(sys.executable).parent / ("pai.exe" if sys.platform == "win32" else "pai")
    if beside.is_file():
        return beside.absolute()
    found = shutil.which("pai")
    if found:
        return Path(found).absolute()
    raise ConfigError(f"no `pai` beside {sys.executable} nor on PATH: install pai-brain (pip install -e .) first")


def server_entry(pai: Path, home: Path) -> dict:
    """The stdio server as every client spells it: command, args, env."""
    return {"command": str(pai), "args": ["mcp"], "env": {"PAI_HOME": str(home)}}


def snippet(client: str, pai: Path, home: Path) -> str:
    """What to paste for `client`: a `claude mcp add-json` command line for Claude Code, `mcpServers` JSON for
    the others."""
    if client not in CLIENTS:
        raise ConfigError(f"--print-config: unknown client {client!r}; one of {', '.join(CLIENTS)}")
    entry = server_entry(pai, home)
    if client == "claude-code":
        return shlex.join(["claude", "mcp", "add-json", "--scope", "user", NAME, json.dumps({"type": "stdio"} | entry)])
    return json.dumps({"mcpServers": {NAME: entry}}, indent=2)


def print_config(client: str) -> tuple[str, list[str]]:
    """(the snippet for stdout, the notes for stderr) for the running `pai` and the resolved home."""
    home = pai_home().absolute()
    text = snippet(client, pai_executable(), home)
    notes = [f"pai mcp --print-config {client}: {CLIENTS[client]}; the memory: {home}"]
    if os.environ.get("DATABASE_URL"):
        notes.append("DATABASE_URL is set here: add it to the snippet's env for the server to use that database")
    return text, notes
