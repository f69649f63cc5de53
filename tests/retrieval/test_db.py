"""The embedded server is shared by concurrent processes; migrations are idempotent."""

import os
import subprocess
import sys
import time

from retrieval.db import migrate

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
    for _ in range(50):  # the last user out stops the server
        if not pidfile.exists():
            break
        time.sleep(0.1)
    assert not pidfile.exists()
