"""`pai mcp --print-config CLIENT` (cli/mcp_config.py): the snippet names the running `pai` and pins PAI_HOME, both
absolute; an unknown client is one line listing the choices. Then what the issue asks: notes ingested into a home,
`pai mcp` started exactly as the printed snippet says (its command, args and env, nothing else but what a client
passes), in another folder with no params.yaml, answers `context` from them over the MCP SDK's stdio client; and
`pai serve` started the same way answers /query."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import time
from importlib import metadata
from pathlib import Path
from urllib.parse import urlparse

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from typer.testing import CliRunner

from cli.main import app
from cli.mcp_config import CLIENTS, ConfigError, pai_executable, snippet
from tests.waiting import wait_for

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]
NOTES = {
    "offsite.md": "# Team offsite\n\nThe 2026 team offsite is in Lyon, at the Hotel Dieu, from 3 to 5 June.\n",
    "bees.md": "# Bees\n\nHoney bees store nectar in wax combs and fan it with their wings until it is honey.\n",
}


def entry_of(client: str, stdout: str) -> dict:
    """The server entry a client reads out of the printed snippet."""
    if client == "claude-code":
        argv = shlex.split(stdout)
        assert argv[:6] == ["claude", "mcp", "add-json", "--scope", "user", "pai-brain"] and len(argv) == 7
        entry = json.loads(argv[6])
        assert entry.pop("type") == "stdio"
        return entry
    servers = json.loads(stdout)["mcpServers"]
    assert list(servers) == ["pai-brain"]
    return servers["pai-brain"]


@pytest.mark.parametrize("client", list(CLIENTS))
def test_the_snippet_names_this_pai_and_pins_the_home(client, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PAI_HOME", "relative/home")  # resolved: the client starts the server in another folder
    r = runner.invoke(app, ["mcp", "--print-config", client])
    assert r.exit_code == 0, r.output
    entry = entry_of(client, r.stdout)  # stdout holds the snippet alone; the note on where it goes is on stderr
    assert entry == {
        "command": str(pai_executable()),
        "args": ["mcp"],
        "env": {"PAI_HOME": str(tmp_path / "relative/home")},
    }
    assert Path(entry["command"]).is_absolute() and os.access(entry["command"], os.X_OK)
    assert str(tmp_path / "relative/home") in r.stderr


def test_the_snippet_quotes_what_a_shell_or_json_would_break_on(tmp_path):
    home = tmp_path / 'it\'s a "home" with spaces'
    for client in CLIENTS:
        entry = entry_of(client, snippet(client, Path("/opt/pai brain/bin/pai"), home))
        assert entry["command"] == "/opt/pai brain/bin/pai" and entry["env"]["PAI_HOME"] == str(home)


@pytest.mark.parametrize(
    "name",
    ["vscode", "", "Claude-Desktop", "claude-desktop\x00", "claude_code", "ｃｕｒｓｏｒ", "сursor", "x" * 10_000],
)
def test_an_unknown_client_is_one_line_listing_the_choices(name):
    with pytest.raises(ConfigError, match="one of claude-desktop, claude-code, cursor$"):
        snippet(name, Path("/bin/pai"), Path("/home"))
    if "\x00" not in name:  # a NUL cannot be a command-line argument
        r = runner.invoke(app, ["mcp", "--print-config", name])
        assert r.exit_code == 2 and r.stdout == "" and "Traceback" not in r.output
        assert "one of claude-desktop, claude-code, cursor" in r.stderr


def _installed_elsewhere() -> bool:
    """The venv's `pai` runs another checkout's code (this is a worktree of an editable install elsewhere)."""
    url = json.loads(metadata.distribution("pai-brain").read_text("direct_url.json") or "{}").get("url", "")
    return Path(urlparse(url).path) != REPO


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_pai_mcp_as_the_snippet_says_from_another_folder_answers_from_the_memory(tmp_path):
    home, notes, elsewhere = tmp_path / "home", tmp_path / "notes", tmp_path / "some-project"
    notes.mkdir()
    elsewhere.mkdir()
    for name, text in NOTES.items():
        (notes / name).write_text(text)
    (home / "cache").parent.mkdir()
    for cache in ("cache", "models"):  # the converted embedder and the scanner's rules, not built again
        (REPO / ".pai" / cache).mkdir(parents=True, exist_ok=True)
        (home / cache).symlink_to(REPO / ".pai" / cache)
    # What an MCP client passes: HOME, a bare PATH, the snippet's env. PYTHONPATH only in a worktree, whose venv's
    # `pai` would otherwise run the other checkout's code.
    client_env = {"HOME": str(tmp_path / "user"), "PATH": "/usr/bin:/bin"}
    client_env |= {"PYTHONPATH": str(REPO)} if _installed_elsewhere() else {}
    user_env = {**os.environ, **client_env, "PATH": os.environ["PATH"], "PAI_HOME": str(home)}
    user_env.pop("DATABASE_URL", None)
    user_env.pop("PAI_URL", None)

    printed = subprocess.run(
        [str(pai_executable()), "mcp", "--print-config", "claude-desktop"],
        env=user_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    entry = entry_of("claude-desktop", printed.stdout)
    ingest = subprocess.run(
        [entry["command"], "ingest", str(notes)], env=user_env, cwd=tmp_path, capture_output=True, text=True
    )
    assert ingest.returncode == 0, ingest.stderr
    assert not (elsewhere / "params.yaml").exists() and not (elsewhere / ".pai").exists()

    async def ask() -> tuple[str, float]:
        server = StdioServerParameters(
            command=entry["command"], args=entry["args"], env=client_env | entry["env"], cwd=str(elsewhere)
        )
        t0 = time.monotonic()
        with anyio.fail_after(240):
            async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                ready = time.monotonic() - t0
                r = await session.call_tool("context", {"query": "where is the team offsite?"})
                assert not r.is_error, r.content
                return "\n".join(c.text for c in r.content if c.type == "text"), ready

    body, ready = anyio.run(ask)
    assert "offsite.md" in body and "Lyon" in body, body
    assert not (elsewhere / ".pai").exists() and sorted(p.name for p in elsewhere.iterdir()) == []

    port = _free_port()  # `pai serve` the same way: another folder, the client's environment
    serve = subprocess.Popen(
        [entry["command"], "serve", "--port", str(port)],
        env=client_env | entry["env"],
        cwd=elsewhere,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:

        def answered() -> httpx.Response:
            assert serve.poll() is None, serve.stderr.read().decode()
            return httpx.post(f"http://127.0.0.1:{port}/query", json={"query": "how do bees make honey?"}, timeout=60)

        r = wait_for(answered, 240, 0.5, ignore=(httpx.TransportError,))
        assert r.status_code == 200 and "wax combs" in r.text and "bees.md" in r.text, r.text
    finally:
        serve.terminate()
        serve.wait(timeout=60)
    assert sorted(p.name for p in elsewhere.iterdir()) == []
    print(f"pai mcp from another folder: initialize answered {ready:.1f} s after start")
