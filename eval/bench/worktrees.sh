# Sourced by main_job_worktrees.sh and stages_worktrees.sh (needs REPO and HOME_NOW set).
# worktree_pair OLD_REV NEW_REV WORKDIR: WORKDIR/old and WORKDIR/new, git worktrees of the two commits with their
# judged sets unpacked; WORKDIR/home-{old,new}, homes sharing this home's model caches; WORKDIR/times headed by
# the machine. Each script then lays its own inputs (embedding cache, feedback, benchmarks) in.
worktree_pair() {
  local old=$1 new=$2 b=$3 v rev d
  rm -rf "$b" && mkdir -p "$b"
  echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores" > "$b/times"
  for v in old new; do
    rev=$old; [ $v = new ] && rev=$new
    git -C "$REPO" worktree add -q --detach "$b/$v" "$rev"
    (cd "$b/$v" && PYTHONPATH="$b/$v" "$REPO/.venv/bin/python" -m eval.judged_sets >/dev/null)
    mkdir -p "$b/home-$v"
    for d in cache models; do [ -d "$HOME_NOW/$d" ] && ln -s "$HOME_NOW/$d" "$b/home-$v/$d"; done
  done
}
