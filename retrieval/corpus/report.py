"""What an ingest run did: documents new, updated, unchanged and deleted, chunks written and skipped, redactions,
errors (one line each), and how long it took."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field


@dataclass
class IngestReport:
    files: int = 0
    documents_new: int = 0
    documents_updated: int = 0
    documents_unchanged: int = 0
    documents_deleted: int = 0
    chunks_inserted: int = 0
    chunks_kept: int = 0
    chunks_deleted: int = 0
    duplicates_skipped: int = 0
    near_linked: int = 0
    skipped_files: int = 0
    redactions: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    index_deferred: bool = False  # a first load: the HNSW index was built after the vectors were in (`bulk`)

    @property
    def documents(self) -> int:
        return self.documents_new + self.documents_updated + self.documents_unchanged

    @property
    def docs_per_second(self) -> float:
        return self.documents / self.seconds if self.seconds else 0.0

    def add(self, other: IngestReport) -> None:
        """Count `other`'s documents, chunks, redactions and errors here too."""
        for name, value in vars(other).items():
            if name not in ("files", "skipped_files", "seconds", "index_deferred"):
                setattr(self, name, getattr(self, name) + value)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["redactions"] = dict(self.redactions)
        d["documents"] = self.documents
        d["docs_per_second"] = round(self.docs_per_second, 1)
        d["seconds"] = round(self.seconds, 2)
        return d
