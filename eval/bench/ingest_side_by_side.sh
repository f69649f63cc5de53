#!/usr/bin/env bash
# `pai lab bench ingest`'s measurement on an older revision and on this working tree, one after the other on one
# machine: SciFact's corpus embedded alone, then ingested into a fresh database. A revision from before
# `pai lab bench ingest` gets this tree's eval/bench/ingest.py and retrieval/db.py's scratch_database() copied in
# (the bench; its ingest code stays its own).   usage: [MAX_DOCS=N] eval/bench/ingest_side_by_side.sh OLD_REV
# MAX_DOCS: the corpus's first N documents only (0, the default: all of it)
set -euo pipefail
cd "$(dirname "$0")/../.."
here=$PWD old=$(mktemp -d)
trap 'git worktree remove --force "$old/tree"; rm -rf "$old"' EXIT
git worktree add -q "$old/tree" "$1"
mkdir -p "$old/tree/eval/bench" && cp eval/bench/__init__.py eval/bench/ingest.py "$old/tree/eval/bench/"
grep -q "def scratch_database" "$old/tree/retrieval/db.py" || {
  sed -i '0,/^import re$/s//import re\nimport uuid\nfrom contextlib import contextmanager\nfrom psycopg.conninfo import make_conninfo/' "$old/tree/retrieval/db.py"
  sed -n '/^@contextmanager$/,$p' retrieval/db.py >>"$old/tree/retrieval/db.py"
}
ln -s "$here/.pai" "$old/tree/.pai"  # an older revision's default home: .pai under the folder it runs in
export PAI_HOME="$here/.pai"          # this tree's: the checkout's, never the user's memory (retrieval.db.pai_home)
for tree in "$old/tree" "$here"; do
  echo "== $(git -C "$tree" rev-parse --short HEAD)$([ "$tree" = "$here" ] && echo ' + working tree')"
  (cd "$tree" && CORPUS="$here/data/judged/scifact/corpus.jsonl" "$here/.venv/bin/python" - <<'PY'
import json
import os
from pathlib import Path
from eval.bench import ingest
from retrieval.embed import get_embedder
from retrieval.params import EmbedParams, IngestParams, SearchParams, load_section
ip, sp = load_section("params.yaml", "ingest", IngestParams), load_section("params.yaml", "search", SearchParams)
docs = ingest.corpus_documents(Path(os.environ["CORPUS"]), int(os.environ.get("MAX_DOCS", "0")), ip.max_file_bytes)
r = ingest.run(docs, get_embedder(load_section("params.yaml", "embed", EmbedParams)), ip, sp)
print(json.dumps({k: v for k, v in r.items() if k != "errors"}))
PY
  )
done
