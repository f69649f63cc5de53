"""What the `pai` commands print with: piped to a log, every line whole and tables readable."""


def test_piped_output_keeps_every_line_whole_and_tables_readable(capsys):
    from rich.table import Table

    from cli.terminal import make_console

    console = make_console()  # pytest's stderr is not a terminal, as in `pai lab cycle > cycle.log 2>&1`
    line = "deploy: " + " ".join(f"figure{i}=0.{i:04d}" for i in range(30))
    console.print(line)
    t = Table(title="eval")
    for col in (
        "system",
        "recall@5",
        "precision@5",
        "ndcg@5",
        "mrr",
        "json_valid",
        "answer_in_context",
        "latency_p50_ms",
    ):
        t.add_column(col)
    t.add_row("ranker", "0.8652", "0.2731", "0.7751", "0.8013", "1.0", "None", "37.02")
    console.print(t)
    err = capsys.readouterr().err
    assert line in err.splitlines() and "…" not in err
    assert any("ranker" in row and "0.8652" in row and "37.02" in row for row in err.splitlines())
