"""The README is a front door and docs/ holds the rest: README short and linking every page, every page
in mkdocs.yml's nav, and the README's test command the one .ci/run
runs. Reads files only; `mkdocs build --strict` (in .ci/run) checks the links between pages."""

import ast
import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
PAGES = sorted(p.name for p in (REPO / "docs").glob("*.md"))


def nav_files(nav) -> list[str]:
    """The page files of an mkdocs nav, at any depth."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [f for v in nav.values() for f in nav_files(v)]
    return [f for item in nav for f in nav_files(item)]


def test_readme_is_a_front_door_of_at_most_150_lines():
    assert len(README.splitlines()) <= 150


def test_readme_links_every_docs_page():
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)(?:#[\w-]*)?\)", README))
    assert PAGES and set(PAGES) <= linked, f"README does not link {sorted(set(PAGES) - linked)}"
    assert linked <= set(PAGES), f"README links missing pages {sorted(linked - set(PAGES))}"


def test_mkdocs_nav_lists_every_page_and_only_pages_that_exist():
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["docs_dir"] == "docs"
    assert sorted(nav_files(config["nav"])) == PAGES


def test_readme_gives_the_two_commands_and_the_test_command_ci_runs():
    assert "bash .ci/install --user && .venv/bin/pai lab cycle" in README
    assert "bash .ci/run" in README
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    pytest_lines = [line for line in ci.splitlines() if line.startswith(".venv/bin/python -m pytest")]
    assert pytest_lines
    for line in pytest_lines:  # .ci/run says it runs exactly the test command README.md gives
        assert f"`{line}`" in README, line


def test_the_architecture_map_names_every_module():
    """docs/architecture.md is the map a newcomer reads: every module and bench script of the code packages is on it."""
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    files = [p for pkg in ("retrieval", "serving", "training", "eval", "cli") for p in (REPO / pkg).rglob("*.py")]
    files += list((REPO / "eval" / "bench").glob("*.sh"))
    missing = sorted(str(p.relative_to(REPO)) for p in files if p.name != "__init__.py" and p.name not in page)
    assert not missing, f"docs/architecture.md does not name {missing}"


def test_the_pipeline_page_names_every_baseline():
    """docs/pipeline.md's evaluate paragraph names each row of `eval.systems.BASELINE_TABLE` (docs/changing.md,
    "Add a baseline", step 2)."""
    from eval.systems import BASELINES

    page = (REPO / "docs" / "pipeline.md").read_text(encoding="utf-8")
    evaluate = page[page.index("- **evaluate**") :].split("\n- **", 1)[0]
    missing = [b for b in BASELINES if f"`{b}`" not in evaluate]
    assert not missing, f"docs/pipeline.md's evaluate paragraph does not name the baselines {missing}"


def test_every_mcp_tool_is_listed_where_a_reader_looks():
    """Each tool `build_mcp` serves is on the "Tools:" line of serving/mcp_server.py's docstring, in `pai mcp`'s
    help (cli/assistant.py), in docs/service.md's tools table and its count of tools (docs/changing.md, "Add an
    MCP tool", step 5). Reads the source: no server is started."""
    server = (REPO / "serving" / "mcp_server.py").read_text(encoding="utf-8")
    tools = re.findall(r"\bspec\(\n\s*(\w+),", server)  # the rows of `specs`
    assert tools[:2] == ["context", "feedback"]
    doc = ast.get_docstring(ast.parse(server))
    listed = doc[doc.index("Tools:") :]
    assert not [t for t in tools if f"`{t}`" not in listed], "serving/mcp_server.py's Tools: line"
    assistant = (REPO / "cli" / "assistant.py").read_text(encoding="utf-8")
    help_ = re.search(r"Serve the memory to an assistant as MCP tools: ([^.]+)\.", assistant).group(1)
    assert sorted(re.split(r",\s*", " ".join(help_.split()))) == sorted(tools), "pai mcp's help (cli/assistant.py)"
    service = (REPO / "docs" / "service.md").read_text(encoding="utf-8")
    table = set(re.findall(r"^\| `(\w+)\(", service, re.M))
    assert table == set(tools), f"docs/service.md's tools table: {sorted(table ^ set(tools))}"
    words = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
    assert f"gives an assistant {words[len(tools)]} tools" in service, "docs/service.md's count of tools"


def test_the_docs_the_code_cites_exist():
    """A docstring that sends the reader to a document names one the repository holds."""
    cited = set()
    for pkg in ("retrieval", "serving", "training", "eval", "cli", "tests"):
        for path in (REPO / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    doc = ast.get_docstring(node) or ""
                    cited |= {
                        (path.name, m) for m in re.findall(r"(?<![\"\w/])(docs/[\w-]+\.md|[A-Z][A-Z_]+\.md)\b", doc)
                    }
    missing = sorted(f"{name}: {doc}" for name, doc in cited if not (REPO / doc).exists())
    assert cited and not missing, missing


def test_only_the_measurements_page_keeps_the_labs_history():
    """A reader's page names the product, not the lab's history: no "the main job", no "stop N" outside
    docs/measurements.md (the issue's `grep -c "main job\\|stop [0-9]" README.md docs/*.md`)."""
    pages = [REPO / "README.md", *(p for p in sorted((REPO / "docs").glob("*.md")) if p.name != "measurements.md")]
    hits = {
        p.name: n for p in pages if (n := len(re.findall(r"^.*(?:main job|stop [0-9]).*$", p.read_text("utf-8"), re.M)))
    }
    assert not hits, f"lines naming the main job or a stop (say what it is, or link measurements.md): {hits}"
