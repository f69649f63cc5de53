"""The page's HTML: Jinja2 templates (autoescaped: every value a note, a query or an answer brings is text, never
markup), the security headers every page carries (no script at all may run: the pages have none), and the plots,
drawn as inline SVG on the server."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

HERE = Path(__file__).parent
HEADERS = {
    # the pages hold no script: none may run, whatever a stored note holds
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self';"
    " frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
MAX_SHOWN_CHARS = 20_000  # a chunk's text past this is cut on a page (a 1 MB line renders, and is cut)


def _when(t: datetime | str | None) -> str:
    if t is None:
        return ""
    if isinstance(t, str):
        t = datetime.fromisoformat(t)
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _cut(text: str | None, n: int = MAX_SHOWN_CHARS) -> str:
    text = text or ""
    return text if len(text) <= n else text[:n] + f" … ({len(text) - n:,} more characters)"


ENV = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(["html"], default=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
ENV.filters["when"] = _when
ENV.filters["cut"] = _cut


def page(name: str, status: int = 200, **values) -> HTMLResponse:
    return HTMLResponse(ENV.get_template(name).render(**values), status, headers=HEADERS)


def steps_plot(series: dict[str, list[float]], width: int = 520, height: int = 160) -> dict:
    """Lines over x = 1..n for an SVG: {"width", "height", "lines": [{"name", "points", "last"}], "max", "n"}."""
    n = max((len(v) for v in series.values()), default=0)
    top = max((max(v) for v in series.values() if v), default=0) or 1
    lines = []
    for name, values in series.items():
        pts = [
            (round(8 + (width - 16) * i / max(n - 1, 1), 1), round(height - 8 - (height - 16) * v / top, 1))
            for i, v in enumerate(values)
        ]
        lines.append(
            {"name": name, "points": " ".join(f"{x},{y}" for x, y in pts), "last": values[-1] if values else 0}
        )
    return {"width": width, "height": height, "lines": lines, "max": top, "n": n}
