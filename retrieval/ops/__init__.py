"""Keeping the store healthy over time (`pai maintain`, and the service on a schedule): the maintenance
run and its garbage collection (`maintain`), re-scrubbing documents stored under an older scrubber
(`rescrub`), usage weights from the feedback log (`usage`), and VACUUM/ANALYZE with HNSW recall checks
(`health`). The one room that reaches into the others; none of them reaches into it."""
