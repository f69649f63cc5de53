"""The import graph is the one docs/architecture.md draws ("Packages and who may import whom"), read from every
module's imports (ast, no import runs): the layers hold, our own imports sit at module top, no module cycles,
each DVC stage's `deps` cover every project module its `python -m` imports (so a code change re-runs the stage),
inside `retrieval` the rooms keep their arrows, and the product never imports the lab (cli.lab, eval.bench)."""

import ast
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
BACKENDS = {"serving", "serving.selectors", "serving.llm_selectors", "serving.interface"}  # what training/eval may use
ALLOWED = {
    "retrieval": set(),
    "serving": {"retrieval"},
    "training": {"retrieval", "serving"},
    "eval": {"retrieval", "serving"},
    "cli": {"retrieval", "serving", "training", "eval"},
}
LAB = ("cli.lab", "eval.bench")  # the lab, apart: it may import the product, the product never imports it
ENTRY = "cli.main"  # `pai` itself, the one module that puts the user's commands and `pai lab` side by side
# retrieval's rooms and the rooms each may import; every room may import the shared modules at the top of
# retrieval (db, params, embed, embedding_cache, chunking, files, progress, tracking, scrub/), which import no room
ROOMS = {
    "contracts": set(),
    "query": set(),
    "corpus": {"contracts"},
    "logs": {"query", "contracts"},
    "conversation": {"corpus"},
    "ops": {"contracts", "corpus", "query", "logs"},
}


def modules() -> dict[str, Path]:
    return {
        ".".join(p.relative_to(REPO).with_suffix("").parts): p
        for pkg in ALLOWED
        for p in sorted((REPO / pkg).rglob("*.py"))
    }


def imports(name: str, path: Path) -> list[tuple[str, ast.stmt, bool]]:
    """(imported module of ours, the statement, whether it is at module top) for one module."""
    tree, package, known = ast.parse(path.read_text(encoding="utf-8")), name.rsplit(".", 1)[0], modules()
    top, out = set(map(id, tree.body)), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = (
                ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [node.module or ""]).strip(
                    "."
                )
                if node.level
                else node.module
            )
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        out += [(t, node, id(node) in top) for t in dict.fromkeys(targets) if t.split(".")[0] in ALLOWED]
    return out


def test_layers_hold_and_our_imports_sit_at_module_top():
    bad = []
    for name, path in modules().items():
        pkg = name.split(".")[0]
        for target, node, at_top in imports(name, path):
            other = target.split(".")[0]
            where = f"{path.relative_to(REPO)}:{node.lineno} imports {target}"
            if other != pkg and other not in ALLOWED[pkg]:
                bad.append(f"{where}: {pkg} may not import {other}")
            elif pkg in ("training", "eval") and other == "serving" and target not in BACKENDS:
                bad.append(f"{where}: {pkg} may use serving's selector backends only")
            if not at_top:
                bad.append(f"{where}: inside a function (our imports sit at module top)")
    assert not bad, "\n".join(bad)


def test_no_module_imports_itself_back():
    graph = {name: {t for t, _, _ in imports(name, path) if t in modules()} for name, path in modules().items()}
    done, cycles = set(), []

    def visit(name: str, trail: list[str]) -> None:  # depth first; an edge back into the trail is a cycle
        for nxt in sorted(graph[name]):
            if nxt in trail:
                cycles.append(" -> ".join(trail[trail.index(nxt) :] + [nxt]))
            elif nxt not in done:
                visit(nxt, trail + [nxt])
        done.add(name)

    for name in sorted(graph):
        if name not in done:
            visit(name, [name])
    assert not cycles, "\n".join(cycles)


def test_dvc_stage_deps_cover_every_module_the_stage_imports():
    known, missing = modules(), []
    for stage, spec in yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"].items():
        deps = [d if isinstance(d, str) else next(iter(d)) for d in spec.get("deps", [])]
        deps = [d.rstrip("/") for d in deps if "$" not in d and not d.startswith("..")]
        todo, seen = [spec["cmd"].split("python -m ")[1].split()[0]], set()
        while todo:
            name = todo.pop()
            if name in seen or name not in known:
                continue
            seen.add(name)
            todo += [t for t, _, _ in imports(name, known[name])]
            rel = known[name].relative_to(REPO).as_posix()
            if not rel.endswith("__init__.py") and not any(rel == d or rel.startswith(d + "/") for d in deps):
                missing.append(f"{stage}: {rel}")
    assert not missing, "dvc.yaml deps miss modules their stage imports:\n" + "\n".join(missing)


def in_lab(name: str) -> bool:
    return any(name == lab or name.startswith(lab + ".") for lab in LAB)


def test_the_product_never_imports_the_lab():
    bad = [
        f"{path.relative_to(REPO)}:{node.lineno} imports {target}: the product may not import the lab"
        for name, path in modules().items()
        if not in_lab(name) and name != ENTRY
        for target, node, _ in imports(name, path)
        if in_lab(target)
    ]
    assert not bad, "\n".join(bad)


def room(name: str) -> str | None:
    """The room a retrieval module lives in, or None for the shared modules at the top."""
    parts = name.split(".")
    return parts[1] if len(parts) > 2 and parts[1] in ROOMS else None


def test_retrieval_rooms_keep_their_arrows():
    bad = []
    for name, path in modules().items():
        if name.split(".")[0] != "retrieval":
            continue
        for target, node, _ in imports(name, path):
            mine, theirs = room(name), room(target)
            if theirs is not None and theirs != mine and (mine is None or theirs not in ROOMS[mine]):
                where = "retrieval's shared modules" if mine is None else f"room {mine}"
                bad.append(f"{path.relative_to(REPO)}:{node.lineno} imports {target}: {where} may not import {theirs}")
    assert not bad, "\n".join(bad)


def test_every_room_is_drawn_and_its_init_only_says_what_it_owns():
    packages = {p.parent.name for p in (REPO / "retrieval").glob("*/__init__.py")} - {"scrub"}
    assert packages == set(ROOMS), "a retrieval subpackage missing from ROOMS (or a room without a folder)"
    for name in ROOMS:
        tree = ast.parse((REPO / "retrieval" / name / "__init__.py").read_text(encoding="utf-8"))
        assert ast.get_docstring(tree), f"retrieval/{name}/__init__.py: say what the room owns"
        assert len(tree.body) == 1, f"retrieval/{name}/__init__.py: a docstring only (callers import the modules)"
