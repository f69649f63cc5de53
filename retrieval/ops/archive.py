"""The whole memory as one archive (`pai export`, `pai import`): every table of the store read from the catalogue
(so a column or table a later migration adds travels without a change here) in one REPEATABLE READ snapshot, and
loaded into an empty store in one transaction, ids kept, sequences moved past them.

Not carried, because the target has its own or rebuilds it: `chunk_terms` (the full-text rows: the trigger on
`chunks` writes them again as chunks are loaded), `schema_migrations` (the target's schema is its own),
`store_identity` (the target keeps its identity; the source's is in the manifest and in `store_imports`),
`store_imports` (the target's own history). The indexes (HNSW, GIN) are built by the load.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from ..db import first_line, latest_version, schema_version, store_id
from . import archive_format
from .archive_format import ArchiveError, Member

NOT_CARRIED = ("chunk_terms", "schema_migrations", "store_identity", "store_imports")
SEEDED = ("capture_noise",)  # tables a migration fills with a row: an import replaces it, it does not make a store full


@dataclass(frozen=True)
class Table:
    name: str
    columns: list[str]  # stored columns, in catalogue order (generated ones are computed again)
    key: list[str]  # the primary key: the order rows are written in


def tables(conn: psycopg.Connection) -> list[Table]:
    """The store's tables (but NOT_CARRIED), parents before the tables whose foreign keys point at them."""
    rows = conn.execute(
        """
        SELECT c.relname,
               array_agg(a.attname ORDER BY a.attnum) FILTER (WHERE a.attgenerated = ''),
               coalesce((SELECT array_agg(k.attname ORDER BY array_position(i.indkey, k.attnum))
                         FROM pg_index i JOIN pg_attribute k ON k.attrelid = i.indrelid AND k.attnum = ANY(i.indkey)
                         WHERE i.indrelid = c.oid AND i.indisprimary), '{}')
        FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = current_schema()
        JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
        WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition AND c.relname <> ALL(%s)
        GROUP BY c.oid, c.relname
        """,
        (list(NOT_CARRIED),),
    ).fetchall()
    found = {name: Table(name, list(cols), list(key)) for name, cols, key in rows}
    edges = conn.execute(
        """
        SELECT c.relname, p.relname FROM pg_constraint k
        JOIN pg_class c ON c.oid = k.conrelid JOIN pg_class p ON p.oid = k.confrelid
        WHERE k.contype = 'f' AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
        """
    ).fetchall()
    parents = {t: {p for c, p in edges if c == t and p != t and p in found} for t in found}
    ordered: list[str] = []
    while len(ordered) < len(found):
        ready = sorted(t for t in found if t not in ordered and parents[t] <= set(ordered))
        if not ready:
            raise ArchiveError(f"foreign keys form a cycle among {sorted(set(found) - set(ordered))}")
        ordered += ready
    return [found[t] for t in ordered]


def export_store(conn: psycopg.Connection, dest: Path, pai_version: str, files: list[tuple[str, Path]] = ()) -> dict:
    """Write the store (and `files`: (name under files/, path) pairs, e.g. the registry's) to the archive `dest`, as
    of one snapshot: a write committed while it runs is in it wholly or not at all. Returns the manifest."""
    dest = Path(dest)
    with tempfile.TemporaryDirectory(dir=dest.resolve().parent, prefix=".pai-export-") as tmp:
        members, manifest_tables = [], {}
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            source_id, version = store_id(conn), schema_version(conn)
            for t in tables(conn):
                path = Path(tmp) / f"{t.name}.tsv"
                rows, member = _dump(conn, t, path)
                manifest_tables[t.name] = {
                    "rows": rows,
                    "columns": t.columns,
                    "bytes": member.size,
                    "sha256": member.sha256,
                }
                members.append((member, path))
            created_at = conn.execute("SELECT now()").fetchone()[0]  # the snapshot's moment
        listed = []
        for name, path in files:
            member = _hashed(f"files/{name}", path)
            archive_format.safe_name(member.name)
            members.append((member, path))
            listed.append({"name": member.name, "bytes": member.size, "sha256": member.sha256})
        manifest = {
            "format": archive_format.FORMAT,
            "format_version": archive_format.FORMAT_VERSION,
            "created_at": created_at.isoformat(),
            "pai_version": pai_version,
            "store_id": source_id,
            "schema_version": version,
            "host": platform.node(),
            "tables": manifest_tables,
            "files": listed,
        }
        archive_format.write(dest, manifest, members)
    return manifest


def import_store(
    conn: psycopg.Connection,
    src: Path,
    workdir: Path,
    into_empty: bool = True,
    moved: Callable[[Path], tuple[str, str] | None] = lambda files: None,
) -> dict:
    """Load the archive `src` into the store of `conn`, all or nothing: its members are unpacked into `workdir` and
    checked against the manifest, and the target against the archive, before anything is written. `moved(files)`,
    given the unpacked files/ folder, may name (old, new): a path prefix replaced in every JSON value loaded (the
    version records name model files under the source's home). Returns the manifest. Raises ArchiveError (one
    line); the store is then as it was."""
    manifest = archive_format.unpack(Path(src), workdir)
    move = moved(workdir / "files")
    target = {t.name: t for t in tables(conn)}
    plan = _plan(manifest, target, schema_version(conn))
    if into_empty:
        full = [
            t
            for t in target
            if t not in SEEDED
            and conn.execute(sql.SQL("SELECT EXISTS (SELECT 1 FROM {})").format(sql.Identifier(t))).fetchone()[0]
        ]
        if full:
            raise ArchiveError(
                f"the target store is not empty ({', '.join(full[:4])} hold rows): import into an empty one"
            )
    try:
        with conn.transaction():
            for t in SEEDED:
                if t in target and manifest["tables"].get(t, {}).get("rows"):
                    conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(t)))
            rebuild = _drop_slow_indexes(conn)
            for t in target.values():  # parents first
                if t.name in plan:
                    _load(conn, t.name, plan[t.name], workdir / archive_format.table_member(t.name), manifest)
            for ddl in rebuild:
                conn.execute(ddl)
            _move_sequences(conn, list(plan))
            if move and move[0] != move[1]:
                _replace_in_json(conn, list(plan), *move)
            conn.execute(
                "INSERT INTO store_imports (origin_store_id, archive_created_at, format_version, pai_version, tables)"
                " VALUES (%s, %s, %s, %s, %s)",
                (
                    manifest["store_id"],
                    manifest["created_at"],
                    manifest["format_version"],
                    manifest.get("pai_version"),
                    Jsonb({t: s["rows"] for t, s in manifest["tables"].items()}),
                ),
            )
    except psycopg.Error as e:
        raise ArchiveError(f"import failed, nothing was written: {first_line(e)}") from None
    return manifest


def _plan(manifest: dict, target: dict[str, Table], target_schema: int | None) -> dict[str, list[str]]:
    """table -> the archive's columns to load; refuses an archive this store cannot hold, in one line. An archive of
    an older schema loads by column name: a column it lacks takes the target's default."""
    made = manifest.get("schema_version")
    if not isinstance(made, int) or made > (target_schema or latest_version()):
        raise ArchiveError(
            f"the archive's schema is version {made!r}, this store's {target_schema}: import it with the pai-brain that "
            "made it, or upgrade this one"
        )
    plan = {}
    for name, spec in manifest["tables"].items():
        if name not in target:
            raise ArchiveError(f"the archive holds table {name!r}, which this store has not (schema {target_schema})")
        extra = [c for c in spec["columns"] if c not in target[name].columns]
        if extra:
            raise ArchiveError(f"the archive's {name} has column(s) {', '.join(extra)} this store has not")
        plan[name] = list(spec["columns"])
    return plan


def _dump(conn: psycopg.Connection, t: Table, path: Path) -> tuple[int, Member]:
    cols = sql.SQL(", ").join(map(sql.Identifier, t.columns))
    order = sql.SQL(" ORDER BY {}").format(sql.SQL(", ").join(map(sql.Identifier, t.key))) if t.key else sql.SQL("")
    query = sql.SQL("COPY (SELECT {} FROM {}{}) TO STDOUT").format(cols, sql.Identifier(t.name), order)
    h, size, rows = hashlib.sha256(), 0, 0
    with path.open("wb") as out, conn.cursor().copy(query) as copy:
        for block in copy:
            block = bytes(block)
            h.update(block)
            out.write(block)
            size += len(block)
            rows += block.count(b"\n")  # COPY text escapes newlines inside values: one line per row
    return rows, Member(archive_format.table_member(t.name), size, h.hexdigest())


def _load(conn: psycopg.Connection, name: str, columns: list[str], path: Path, manifest: dict) -> None:
    query = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(name), sql.SQL(", ").join(map(sql.Identifier, columns))
    )
    with conn.cursor() as cur:
        with cur.copy(query) as copy, path.open("rb") as f:
            while block := f.read(archive_format.CHUNK):
                copy.write(block)
        if cur.rowcount != manifest["tables"][name]["rows"]:
            raise ArchiveError(
                f"table {name}: {cur.rowcount} rows loaded, the manifest says {manifest['tables'][name]['rows']}"
            )


def _move_sequences(conn: psycopg.Connection, names: list[str]) -> None:
    """Each serial column's sequence past the largest id loaded, so the next row gets a new id."""
    rows = conn.execute(
        """
        SELECT c.relname, a.attname, pg_get_serial_sequence(format('%%I', c.relname), a.attname)
        FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
        WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND c.relname = ANY(%s)
        """,
        (names,),
    ).fetchall()
    for table, column, seq in rows:
        if seq:
            conn.execute(
                sql.SQL("SELECT setval(%s, coalesce((SELECT max({}) FROM {}), 0) + 1, false)").format(
                    sql.Identifier(column), sql.Identifier(table)
                ),
                (seq,),
            )


def _drop_slow_indexes(conn: psycopg.Connection) -> list[str]:
    """Drop the HNSW and GIN indexes of the tables of this schema (built once after the rows are in: cheaper than row
    by row, as a first ingest does); their definitions, to build them again in the same transaction. None for a role
    that may not drop them: the rows are then indexed as they load."""
    indexes = conn.execute(
        """
        SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x
        JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_am am ON am.oid = i.relam
        WHERE i.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
          AND am.amname IN ('hnsw', 'gin', 'ivfflat') AND NOT x.indisprimary AND NOT x.indisunique
        """
    ).fetchall()
    try:
        with conn.transaction():  # a savepoint: a refusal leaves the indexes
            for name, _ in indexes:
                conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(name)))
    except psycopg.errors.InsufficientPrivilege:
        return []
    return [ddl for _, ddl in indexes]


def _replace_in_json(conn: psycopg.Connection, names: list[str], old: str, new: str) -> None:
    rows = conn.execute(
        """
        SELECT c.relname, a.attname FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
        WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND c.relname = ANY(%s)
          AND a.atttypid = 'jsonb'::regtype AND NOT a.attisdropped
        """,
        (names,),
    ).fetchall()
    for table, column in rows:
        col = sql.Identifier(column)
        conn.execute(
            sql.SQL("UPDATE {} SET {} = replace({}::text, %s, %s)::jsonb WHERE strpos({}::text, %s) > 0").format(
                sql.Identifier(table), col, col, col
            ),
            (json.dumps(old)[1:-1], json.dumps(new)[1:-1], json.dumps(old)[1:-1]),
        )


def _hashed(name: str, path: Path) -> Member:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(archive_format.CHUNK):
            h.update(block)
    return Member(name, os.path.getsize(path), h.hexdigest())
