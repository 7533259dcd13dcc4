"""Render the documented Block Kit messages to HTML and, with headless Chromium, to PNG.

A preview for the docs, not Slack's renderer: it draws the block types the proposal message
uses (header, section with fields, context, actions) in Slack's light theme. Run from the
repository root::

    .venv/bin/python docs/approvals/render_preview.py

It reads ``proposal-message.json`` and ``decided-message.json`` beside it and writes the
``*.png`` there (with ``chromium`` on the PATH; without it, the ``*.html`` previews instead).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
EMOJI = {
    ":raised_hand:": "✋",
    ":white_check_mark:": "✅",
    ":hourglass_flowing_sand:": "⏳",
    ":hourglass:": "⌛",
    ":leftwards_arrow_with_hook:": "↩️",
    ":x:": "❌",
    ":no_entry_sign:": "🚫",
    ":arrows_counterclockwise:": "🔄",
    ":zzz:": "💤",
    ":warning:": "⚠️",
}
STYLE = """
body { font-family: 'Lato', 'Helvetica Neue', Arial, sans-serif; font-size: 15px;
       color: #1d1c1d; background: #fff; margin: 0; padding: 20px 24px; width: 760px; }
.msg { display: flex; gap: 10px; }
.avatar { width: 36px; height: 36px; border-radius: 6px; background: #2f6f4e; color: #fff;
          font-weight: 700; display: flex; align-items: center; justify-content: center; }
.who { font-weight: 900; } .time { color: #616061; font-size: 12px; }
.app { font-size: 10px; background: #e8e8e8; color: #616061; padding: 1px 3px;
       border-radius: 2px; margin: 0 4px; }
.header { font-size: 18px; font-weight: 900; margin: 6px 0 8px; }
.section { margin: 6px 0; line-height: 1.45; }
.fields { display: grid; grid-template-columns: 1fr 1fr; gap: 8px 16px; margin-top: 8px; }
.context { color: #616061; font-size: 12px; margin: 8px 0; }
code { font-family: Monaco, Menlo, Consolas, monospace; font-size: 12px; color: #e01e5a;
       background: #f6f6f6; border: 1px solid #ddd; border-radius: 3px; padding: 1px 3px; }
.mention { color: #1264a3; background: #e8f5fa; border-radius: 3px; padding: 0 2px; }
.date { color: #1264a3; }
.actions { display: flex; gap: 8px; margin: 10px 0 4px; }
.btn { border: 1px solid #bbb; border-radius: 4px; padding: 6px 14px; font-weight: 700;
       font-size: 14px; background: #fff; }
.primary { background: #007a5a; color: #fff; border-color: #007a5a; }
.danger { color: #e01e5a; border-color: #e01e5a; }
"""


def mrkdwn(text: str) -> str:
    """Slack mrkdwn to HTML, for the subset the messages use."""
    out = html.escape(text, quote=False)
    out = re.sub(r"&lt;!date\^\d+\^[^|]*\|([^&]*)&gt;", r'<span class="date">\1</span>', out)
    out = re.sub(r"&lt;@(\w+)&gt;", r'<span class="mention">@\1</span>', out)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*([^*\n]+)\*", r"<b>\1</b>", out)
    for code, char in EMOJI.items():
        out = out.replace(code, char)
    return out.replace("\n", "<br>")


def block(item: dict[str, Any]) -> str:
    """One block as HTML."""
    kind = item["type"]
    if kind == "header":
        text = item["text"]["text"]
        for code, char in EMOJI.items():
            text = text.replace(code, char)
        return f'<div class="header">{html.escape(text)}</div>'
    if kind == "section":
        parts = []
        if "text" in item:
            parts.append(f"<div>{mrkdwn(item['text']['text'])}</div>")
        if "fields" in item:
            fields = "".join(f"<div>{mrkdwn(f['text'])}</div>" for f in item["fields"])
            parts.append(f'<div class="fields">{fields}</div>')
        return f'<div class="section">{"".join(parts)}</div>'
    if kind == "context":
        texts = " ".join(mrkdwn(e["text"]) for e in item["elements"])
        return f'<div class="context">{texts}</div>'
    if kind == "actions":
        buttons = "".join(
            f'<span class="btn {e.get("style", "")}">{html.escape(e["text"]["text"])}</span>'
            for e in item["elements"]
        )
        return f'<div class="actions">{buttons}</div>'
    return ""


def page(message: dict[str, Any]) -> str:
    """A whole HTML page showing ``message`` as posted by the governor's bot."""
    blocks = "".join(block(item) for item in message["blocks"])
    return (
        f"<!doctype html><meta charset='utf-8'><style>{STYLE}</style>"
        "<div class='msg'><div class='avatar'>VG</div><div>"
        "<span class='who'>vLLM Governor</span><span class='app'>APP</span>"
        f"<span class='time'>14:30</span>{blocks}</div></div>"
    )


def main() -> int:
    """Write the HTML previews, and the PNGs when Chromium is available."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with tempfile.TemporaryDirectory() as scratch:
        for name in ("proposal-message", "decided-message"):
            message = json.loads((HERE / f"{name}.json").read_text(encoding="utf-8"))
            preview = (HERE if chromium is None else Path(scratch)) / f"{name}.html"
            preview.write_text(page(message), encoding="utf-8")
            if chromium is not None:
                _screenshot(chromium, preview, HERE / f"{name}.png")
    if chromium is None:
        print("chromium not found: wrote the HTML previews only", file=sys.stderr)
    return 0


def _screenshot(chromium: str, preview: Path, png: Path) -> None:
    # The executable is the Chromium found on the PATH; the arguments are our own files.
    subprocess.run(  # noqa: S603
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--screenshot={png}",
            "--window-size=810,560",
            preview.as_uri(),
        ],
        check=True,
        capture_output=True,
    )


if __name__ == "__main__":
    sys.exit(main())
