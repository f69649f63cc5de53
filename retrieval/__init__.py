"""Retrieval core: what every room shares sits here (where the database is and its schema `db`,
`migrations/`; the `params.yaml` sections `params`; the embedder `embed` and its vector cache
`embedding_cache`; chunks and token counts `chunking`; secret scrubbing `scrub/`; atomic writes `files`,
progress lines `progress`, where MLflow runs go `tracking`), and each concept has its room: `corpus/`,
`query/`, `contracts/`, `logs/`, `conversation/`, `ops/`."""
