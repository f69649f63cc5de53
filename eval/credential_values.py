"""Random values of the shapes credentials take (base62 keys, hex, UUIDs, passwords, made-up providers, prefixed
tokens), from one seeded generator: the mechanism corpus's forms (`mechanism_corpus.py`, `mechanism_forms.py`)
draw from it."""

from __future__ import annotations

import random
import string
import uuid

B62 = string.ascii_letters + string.digits


class Values:
    """Random values of the shapes credentials take, from one seeded generator."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def b62(self, n: int = 32) -> str:
        while True:  # a key has upper- and lower-case letters and digits (a draw without is redrawn)
            v = "".join(self.r.choice(B62) for _ in range(n))
            if any(c.isupper() for c in v) and any(c.islower() for c in v) and sum(c.isdigit() for c in v) >= 2:
                return v

    def b36(self, n: int = 32) -> str:
        """Lower-case letters and digits (both)."""
        return self.b62(n).lower()

    def upper(self, n: int = 27) -> str:
        """Upper-case letters and digits (both)."""
        return self.b62(n).upper()

    def hex(self, n: int = 32) -> str:
        return "".join(self.r.choice("0123456789abcdef") for _ in range(n))

    def b64(self, n: int = 40) -> str:
        return self.b62(n - 2) + self.r.choice("+/") + self.r.choice(B62)

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.r.getrandbits(128), version=4))

    def password(self) -> str:
        return self.b62(10) + self.r.choice("#$%!") + "".join(self.r.choice(B62) for _ in range(3))

    def provider(self) -> str:
        """A made-up provider name: two or three syllables."""
        syl = ["zen", "tri", "quo", "bly", "mar", "vek", "lo", "dra", "pix", "nor", "sal", "tum", "ka", "rio"]
        return "".join(self.r.choice(syl) for _ in range(self.r.choice((2, 3))))

    def prefixed(self) -> str:
        prefix = "".join(self.r.choice(string.ascii_lowercase) for _ in range(self.r.randint(2, 6)))
        mid = self.r.choice(("", "live_", "v1_", "prod-", "pat_"))
        sep = self.r.choice("_-")
        return f"{prefix}{sep}{mid}{self.b62(self.r.randint(24, 40))}"

    def key_id(self) -> str:
        return "".join(self.r.choice(string.ascii_uppercase + string.digits) for _ in range(20))
