"""The embedded server is shared by concurrent processes; migrations are idempotent."""

import os
import subprocess
import sys

from retrieval.db import default_home, migrate, pai_home
from tests.waiting import wait_for

HOLD = """
import sys, time, psycopg
from retrieval.db import database_url
url = database_url()
pid = psycopg.connect(url).execute("SELECT pg_postmaster_start_time()::text").fetchone()[0]
print(pid, flush=True)
time.sleep(float(sys.argv[1]))
"""


def test_migrations_apply_once(conn):
    assert migrate(conn) == []
    names = [n for (n,) in conn.execute("SELECT name FROM schema_migrations ORDER BY version")]
    assert names[0] == "001_chunks.sql"


def test_concurrent_processes_share_one_embedded_server(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"} | {"PAI_HOME": str(tmp_path / ".pai")}
    first = subprocess.Popen([sys.executable, "-c", HOLD, "6"], env=env, stdout=subprocess.PIPE, text=True)
    started = first.stdout.readline().strip()
    second = subprocess.run([sys.executable, "-c", HOLD, "0"], env=env, capture_output=True, text=True, check=True)
    assert second.stdout.strip() == started  # the same postmaster, not a second server
    first.wait(timeout=60)
    pidfile = tmp_path / ".pai" / "pg" / "postmaster.pid"
    wait_for(lambda: not pidfile.exists(), 5, every=0.1)  # the last user out stops the server


def test_the_home_is_the_users_data_folder_whatever_the_working_folder(monkeypatch, tmp_path):
    """An MCP client starts `pai mcp` in any folder with a minimal environment: the memory must not follow the cwd."""
    monkeypatch.delenv("PAI_HOME")
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "platform", "linux")
    assert pai_home() == tmp_path / "user" / ".local" / "share" / "pai-brain"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert pai_home() == tmp_path / "xdg" / "pai-brain"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/data")  # invalid per the XDG spec: ignored
    assert pai_home() == tmp_path / "user" / ".local" / "share" / "pai-brain"
    monkeypatch.setattr(sys, "platform", "darwin")
    assert pai_home() == tmp_path / "user" / "Library" / "Application Support" / "pai-brain"
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path / "local"))
    assert default_home() == tmp_path / "local" / "pai-brain"
    monkeypatch.setenv("PAI_HOME", "")  # set but empty: unset, not the working folder
    assert pai_home() == tmp_path / "local" / "pai-brain"
    monkeypatch.setenv("PAI_HOME", str(tmp_path / "mine"))  # PAI_HOME overrides on every platform
    assert pai_home() == tmp_path / "mine"


def test_the_test_suite_never_runs_on_the_users_home():
    """conftest points PAI_HOME at the checkout's own .pai before any test (and every `pai` they start) runs."""
    assert pai_home() != default_home() and pai_home().name == ".pai"
