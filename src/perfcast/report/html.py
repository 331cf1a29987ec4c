"""`perfcast report`: one self-contained HTML page per campaign.

The page must open anywhere: attached to a ticket, copied off a cluster over SSH, years
later with no network. So it is one file with its data (inline JSON), its script and its
style inline, and a Content-Security-Policy that forbids every fetch: a page that tried to
load anything would fail visibly here rather than silently on a machine without network.
The script and style are perfcast's own (``assets/report.js``, ``assets/report.css``):
plots are a few hundred lines of SVG drawing in plain JavaScript, because a plotting
library inlined into every report would be larger than the data of most campaigns, would
need its licence carried along, and would bring features the report does not use; SVG
renders crisply in every browser, scales without blurring, and prints.

Names from the data are never markup: the JSON is inlined with ``<``, ``>`` and ``&``
written as ``\\u003c``-style escapes (so no ``</script>`` in a call path can end the
script element), and the script builds every element with ``textContent``. The policy
admits exactly the page's own script and style (by their SHA-256), so even markup that
slipped through could not run script.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from collections.abc import Iterable
from importlib import resources
from typing import Any

from perfcast.outputs import OutputKind, PathLike, write_output

GENERATOR = "perfcast report"
MARKER = f'<meta name="generator" content="{GENERATOR}">'
REPORT_FILE = OutputKind("a perfcast report", lambda head: MARKER.encode() in head)
"""An earlier report may be replaced by a new one; any other file may not."""

_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def script_safe_json(data: Any) -> str:
    """``data`` as JSON that can stand inside a ``<script>`` element: no ``<``, ``>`` or
    ``&`` (so neither ``</script>`` nor ``<!--`` can appear), and no line separators,
    which older JavaScript parsers took for line ends. JSON.parse reads it unchanged."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for char, escape in _JSON_ESCAPES.items():
        text = text.replace(char, escape)
    return text


def _asset(name: str) -> str:
    return resources.files("perfcast.report").joinpath("assets", name).read_text("utf-8")


def _digest(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def render_page(data: dict[str, Any], title: str) -> str:
    """The whole page: ``data`` (:func:`perfcast.report.page.report_data`) drawn by the
    report's script."""
    script, style = _asset("report.js"), _asset("report.css")
    policy = html.escape(  # no double quote in it: it stands in a quoted attribute
        f"default-src 'none'; script-src 'sha256-{_digest(script)}'; "
        f"style-src 'sha256-{_digest(style)}'",
        quote=False,
    )
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            MARKER,
            f'<meta http-equiv="Content-Security-Policy" content="{policy}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{html.escape(title)}</title>",
            f"<style>{style}</style>",
            "</head>",
            "<body>",
            "<noscript>This report draws its views with JavaScript; the data is in the "
            'script element "perfcast-data" of this file.</noscript>',
            f'<script type="application/json" id="perfcast-data">{script_safe_json(data)}</script>',
            f"<script>{script}</script>",
            "</body>",
            "</html>",
            "",
        ]
    )


def write_report(
    path: PathLike, data: dict[str, Any], title: str, inputs: Iterable[PathLike]
) -> int:
    """Write the page atomically (never over an input or a file of another kind); returns
    its size in bytes."""
    page = render_page(data, title).encode("utf-8")
    write_output(path, page, REPORT_FILE, inputs)
    return len(page)
