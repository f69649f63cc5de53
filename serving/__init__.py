"""The running service and the `pai` command line."""
