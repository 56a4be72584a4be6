"""The pieces of kfdist's self-contained HTML pages (KFP shows an HTML artifact in an iframe).

The shard step's data validation page and the evaluation report share one
inline style sheet and the same page frame, tables, lists and cards, so they
look alike and need nothing beside themselves.
"""

from __future__ import annotations

import html
from typing import Iterable, Optional, Sequence

#: The pages' inline style sheet.
CSS = """
body{font-family:-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#1f2933;
margin:24px;max-width:1040px}
h1{font-size:22px;margin:0 0 16px}h2{font-size:17px;margin:28px 0 10px;color:#334e68}
h3{font-size:15px;margin:18px 0 8px;color:#334e68}
.verdict{padding:12px 16px;border-radius:6px;font-weight:600;margin-bottom:16px}
.ok{background:#e3f9e5;color:#0e5814;border:1px solid #91d89b}
.no{background:#ffe3e3;color:#8a1c1c;border:1px solid #f29b9b}
.cards{display:flex;flex-wrap:wrap;gap:12px}
.card{border:1px solid #d9e2ec;border-radius:6px;padding:10px 16px;min-width:130px}
.card .v{font-size:22px;font-weight:600}.card .k{font-size:12px;color:#627d98}
table{border-collapse:collapse;font-size:13px}
td,th{border-bottom:1px solid #e4e7eb;padding:4px 12px;text-align:right}td{white-space:nowrap}
th{background:#f5f7fa}td:first-child,th:first-child{text-align:left}
img{max-width:100%;height:auto}.muted{color:#829ab1}
.warn{background:#fff3c4;color:#8d2b0b;border:1px solid #f0b429;padding:10px 14px;border-radius:6px}
.note{background:#eef4fb;color:#243b53;border:1px solid #9fb3c8;padding:10px 14px;border-radius:6px}
.row{display:flex;flex-wrap:wrap;gap:28px;align-items:flex-start}
.row img{max-width:min(620px,100%)}
table.kv td:last-child{text-align:left}
"""


def page(title: str, heading: str, body: Sequence[str]) -> str:
    """A whole page: `body`'s HTML parts, one a line, under `heading`.

    Args:
      title: The page's title after `kfdist `, e.g. `evaluation`.
      heading: The page's first heading.
      body: HTML parts, already escaped.
    """
    return "\n".join([
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>kfdist {title}</title>",
        f"<style>{CSS}</style></head><body><h1>{heading}</h1>", *body, "</body></html>"])


def png_data_uri(fig) -> str:
    """A matplotlib figure as a `data:image/png;base64` URI, to embed in a page."""
    import base64
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def percent(x: Optional[float]) -> str:
    """A share as the pages show it (`87.5%`; `–` for None)."""
    return "–" if x is None else f"{100 * x:.1f}%"


def card(key: str, value: str) -> str:
    """A headline figure: `value` large above its `key`."""
    return (f'<div class="card"><div class="v">{html.escape(value)}</div>'
            f'<div class="k">{html.escape(key)}</div></div>')


def table_rows(rows: Iterable[Iterable[object]]) -> str:
    """Table rows of `rows`' cells, each escaped."""
    return "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>"
                   for r in rows)


def list_items(lines: Iterable[str]) -> str:
    """The `<li>` items of `lines`, each escaped (inside a `<ul>`)."""
    return "".join(f"<li>{html.escape(line)}</li>" for line in lines)
