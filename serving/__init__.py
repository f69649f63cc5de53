"""The running service: the HTTP API, the serving policy (picker), the selector backends, hot-swap,
live ingestion, capture and maintenance in the background, and its doors for assistants (MCP, the
Python client, the turn-end hook). Imports `retrieval` only; the `pai` command line is `cli/`."""
