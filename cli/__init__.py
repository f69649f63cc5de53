"""`pai`, the one command line, and the orchestration that spans packages (nothing imports it)."""
