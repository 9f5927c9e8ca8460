"""HTML: one self-contained file (inline CSS, no script, nothing fetched: a Content-Security-Policy
forbids it), every piece of transcript text escaped. Long tool outputs, arguments and injected
content sit in closed ``<details>``; thinking and summaries are folded; images the transcript
holds are shown from data URIs, others are named."""

from __future__ import annotations

from collections.abc import Iterator
from html import escape

from .base import Renderer, plural, register, short_label
from .markdown import ROLE_NAMES
from .walk import Marker, Part, Turn, View

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

CSS = """
:root { --fg:#1f2328; --muted:#59636e; --line:#d1d9e0; --user:#ddf4ff; --asst:#ffffff; --tool:#f6f8fa;
  --inj:#fff8c5; --sys:#fbefff; --err:#ffebe9; --mark:#8250df; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 980px; padding: 24px; color: var(--fg); background: #f6f8fa;
  font: 15px/1.5 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 19px; margin: 32px 0 4px; }
.meta { color: var(--muted); font-size: 13px; margin-bottom: 16px; }
.turn { border: 1px solid var(--line); border-left: 6px solid #9198a1; border-radius: 6px; margin: 12px 0;
  padding: 8px 14px; background: var(--asst); }
.turn.user { background: var(--user); border-left-color: #0969da; }
.turn.assistant { border-left-color: #1a7f37; }
.turn.tool { background: var(--tool); border-left-color: #9a6700; }
.turn.system { background: var(--sys); border-left-color: var(--mark); }
.turn.injected { background: var(--inj); border-left-color: #bf8700; border-style: dashed; }
.head { font-size: 12px; color: var(--muted); margin-bottom: 6px; }
.head .role { font-weight: 700; color: var(--fg); text-transform: uppercase; letter-spacing: .04em; margin-right: 6px; }
.badge { display: inline-block; font-size: 11px; padding: 0 6px; border-radius: 10px; background: #eaeef2;
  color: var(--fg); margin-left: 4px; }
.badge.inj { background: #f5e0a0; } .badge.err { background: #ffcecb; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; margin: 6px 0; }
.part { margin: 8px 0; }
.label { font-size: 12px; font-weight: 600; color: var(--muted); }
pre { background: #fff; border: 1px solid var(--line); border-radius: 4px; padding: 8px; margin: 4px 0;
  white-space: pre-wrap; overflow-wrap: anywhere; font: 12.5px/1.45 ui-monospace, "SFMono-Regular", Menlo, monospace; }
.output.error pre { background: var(--err); }
.injected pre, pre.injected { background: #fffdf0; }
details > summary { cursor: pointer; color: var(--muted); font-size: 13px; }
details.thinking { border-left: 3px solid #d1d9e0; padding-left: 8px; }
details.thinking .text { color: var(--muted); font-style: italic; }
.marker { margin: 22px 0; padding: 10px 14px; border: 2px solid var(--mark); border-radius: 6px; background: #fbefff; }
.marker .title { font-weight: 700; color: var(--mark); }
img { max-width: 100%; border: 1px solid var(--line); border-radius: 4px; display: block; margin: 6px 0; }
.image-name { font-style: italic; color: var(--muted); }
"""


def esc(text: str) -> str:
    return escape(text, quote=True)


@register
class HtmlRenderer(Renderer):
    name = "html"
    suffixes = (".html", ".htm")
    description = "One self-contained HTML file (inline CSS, no scripts, nothing fetched)."

    def document(self, title: str, views: Iterator[View]) -> Iterator[str]:
        yield (
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<meta name=\"generator\" content=\"ctxtool export\"><title>{esc(title)}</title>"
            f"<style>{CSS}</style></head>\n<body>\n<h1>{esc(title)}</h1>\n"
        )
        count = 0
        for v in views:
            count += 1
            yield "<section class=\"transcript\">\n"
            if count > 1 or "#" in v.label:
                yield f"<h2>{esc(short_label(v.label))}</h2>\n"
            ident = f" <code>{esc(v.id)}</code>" if v.id else ""
            marks = f", {plural(v.markers, 'compaction')}" if v.markers else ""
            yield f"<div class=\"meta\">{esc(v.format)} transcript{ident}: {plural(v.turns, 'message')}{marks}</div>\n"
            for item in v.items:
                yield self.marker(item) if isinstance(item, Marker) else self.turn(item)
            yield "</section>\n"
        if count == 0:
            yield "<p class=\"meta\">No transcript in this file.</p>\n"
        yield "</body></html>\n"

    def turn(self, t: Turn) -> str:
        cls = "turn " + esc(t.role) + (" injected" if t.injected else "")
        head = [f"<span class=\"role\">{esc(ROLE_NAMES.get(t.role, t.role.title()))}</span>#{t.number}"]
        if t.injected:
            head.append(f"<span class=\"badge inj\">injected: {esc(t.injected)}</span>")
        if t.hidden:
            head.append(f"<span class=\"badge\">hidden from {esc(' and '.join(t.hidden))}</span>")
        for extra in (t.model, t.timestamp, f"line {t.line}" if t.line else None):
            if extra:
                head.append(f"<span class=\"badge\">{esc(extra)}</span>")
        body = "".join(self.part(p, t.role) for p in t.parts)
        return f"<div class=\"{cls}\" id=\"m{t.number}\"><div class=\"head\">{' '.join(head)}</div>{body}</div>\n"

    def block(self, text: str, label: str, css: str = "") -> str:
        """Preformatted text under a label; past the collapse length, in a closed <details>."""
        pre = f"<pre class=\"{css}\">{esc(text)}</pre>" if css else f"<pre>{esc(text)}</pre>"
        if self.options.long(text):
            lines = text.count("\n") + 1
            return (f"<details><summary>{label} · {len(text):,} characters, {plural(lines, 'line')}</summary>"
                    f"{pre}</details>")
        return f"<div class=\"label\">{label}</div>{pre}"

    def part(self, p: Part, role: str = "") -> str:
        k = p.kind
        if k == "text" and role == "system" and self.options.long(p.text):
            return (f"<details class=\"part\"><summary>System prompt · {len(p.text):,} characters</summary>"
                    f"<div class=\"text\">{esc(p.text)}</div></details>")
        if k == "text":
            return f"<div class=\"part text\">{esc(p.text.strip(chr(10)))}</div>"
        if k == "injected" and p.label == "summary":
            return (f"<details class=\"part summary\"><summary>Compaction summary · {len(p.text):,} characters"
                    f"</summary><div class=\"text\">{esc(p.text)}</div></details>")
        if k == "injected":
            return f"<div class=\"part\">{self.block(p.text, f'injected: {esc(p.label)}', 'injected')}</div>"
        if k == "thinking":
            return (f"<details class=\"part thinking\"><summary>Thinking · {len(p.text):,} characters</summary>"
                    f"<div class=\"text\">{esc(p.text)}</div></details>")
        if k == "call":
            label = f"tool call <code>{esc(p.label)}</code>" + (f" <span class=\"badge\">{esc(p.call_id)}</span>" if p.call_id else "")
            return f"<div class=\"part call\">{self.block(p.text, label)}</div>"
        if k == "output":
            label = "tool output" + (f" <code>{esc(p.label)}</code>" if p.label else "")
            label += (f" <span class=\"badge\">{esc(p.call_id)}</span>" if p.call_id else "")
            label += " <span class=\"badge err\">error</span>" if p.error else ""
            css = "part output error" if p.error else "part output"
            return f"<div class=\"{css}\">{self.block(p.text, label)}</div>"
        if k == "image":
            if p.url:
                return f"<div class=\"part image\"><img src=\"{esc(p.url)}\" alt=\"{esc(p.label)}\"></div>"
            return f"<div class=\"part image-name\">[{esc(p.label)}]</div>"
        return f"<div class=\"part text\">{esc(p.text)}</div>"

    def marker(self, m: Marker) -> str:
        bits = [m.trigger, f"{m.tokens_before:,} tokens before" if m.tokens_before is not None else None, m.timestamp,
                f"line {m.line}" if m.line else None]
        badges = "".join(f"<span class=\"badge\">{esc(b)}</span>" for b in bits if b)
        if m.kind == "notice":
            return (f"<div class=\"marker notice\"><span class=\"title\">{esc(m.title)}</span> {badges}"
                    f"<div class=\"text\">{esc(m.summary)}</div></div>\n")
        title = "Compaction boundary" if m.kind == "boundary" else "Compaction"
        out = f"<div class=\"marker\"><span class=\"title\">{title}</span> {badges}"
        if m.summary:
            out += (f"<details><summary>Summary · {len(m.summary):,} characters</summary>"
                    f"<div class=\"text\">{esc(m.summary)}</div></details>")
        return out + "</div>\n"
