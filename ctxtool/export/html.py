"""HTML: one self-contained file (inline CSS and one inline script allowed by its hash under a
Content-Security-Policy, nothing fetched), every piece of transcript text escaped; long outputs,
arguments and injected content in closed ``<details>``; an assistant's words as Markdown
(markdown-it-py, raw HTML off, ``javascript:`` links refused). A table of contents, pages of
:attr:`ExportOptions.page_size`, expand/collapse all and search: the script does only that;
without it every page shows and every link still works."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Iterator
from functools import cache
from html import escape
from typing import Any

from .base import Renderer, plural, register, short_label
from .markdown import ROLE_NAMES
from .walk import ExportedTranscript, Marker, Turn, TurnPart

#: the page's one script: pages, expand/collapse all, search, links into hidden pages
SCRIPT = """(function(){
var d=document,pages=[].slice.call(d.querySelectorAll('.page')),cur=0;
function $(i){return d.getElementById(i);}
function show(i){if(!pages.length)return;cur=Math.max(0,Math.min(pages.length-1,i));
pages.forEach(function(p,k){p.hidden=k!==cur;});$('pageinfo').textContent='page '+(cur+1)+' of '+pages.length;}
function reveal(id){var el=$(id);if(!el)return;var p=el.closest('.page');if(p&&p.hidden)show(pages.indexOf(p));
for(var x=el.closest('details');x;x=x.parentElement.closest('details'))x.open=true;el.scrollIntoView();}
function all(open){[].forEach.call(d.querySelectorAll('main details'),function(x){x.open=open;});}
d.body.classList.add('js');
if(pages.length<2)$('pager').hidden=true;
$('prev').onclick=function(){show(cur-1);window.scrollTo(0,0);};
$('next').onclick=function(){show(cur+1);window.scrollTo(0,0);};
$('expand').onclick=function(){all(true);};
$('collapse').onclick=function(){all(false);};
$('q').oninput=function(){var s=this.value.toLowerCase(),n=0,items=d.querySelectorAll('.item');
if(!s){[].forEach.call(items,function(t){t.classList.remove('miss');});show(cur);$('hits').textContent='';return;}
pages.forEach(function(p){p.hidden=false;});
[].forEach.call(items,function(t){var m=t.textContent.toLowerCase().indexOf(s)>=0;t.classList.toggle('miss',!m);if(m)n++;});
$('hits').textContent=n+' matching';};
[].forEach.call(d.querySelectorAll('a[href^="#"]'),function(a){a.onclick=function(){reveal(a.getAttribute('href').slice(1));};});
window.addEventListener('hashchange',function(){reveal(location.hash.slice(1));});
show(0);if(location.hash)reveal(location.hash.slice(1));
})();"""
SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode("ascii")
CSP = f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src '{SCRIPT_HASH}'"

CSS = """
:root { --fg:#1f2328; --muted:#59636e; --line:#d1d9e0; --user:#ddf4ff; --asst:#ffffff; --tool:#f6f8fa;
  --inj:#fff8c5; --sys:#fbefff; --err:#ffebe9; --mark:#8250df; }
* { box-sizing: border-box; }
body { margin: 0; padding: 0 24px 24px 324px; color: var(--fg); background: #f6f8fa;
  font: 15px/1.5 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif; }
main, .bar { max-width: 980px; }
body.notoc { padding-left: 24px; } .notoc main, .notoc .bar { max-width: 1400px; }
h1 { font-size: 24px; margin: 16px 0 4px; } h2 { font-size: 19px; margin: 32px 0 4px; }
.meta { color: var(--muted); font-size: 13px; margin-bottom: 16px; }
nav.toc { position: fixed; top: 0; left: 0; bottom: 0; width: 300px; overflow: auto; padding: 14px 12px;
  background: #fff; border-right: 1px solid var(--line); font-size: 13px; }
nav.toc h2 { font-size: 14px; margin: 0 0 8px; } nav.toc ol { margin: 0; padding-left: 0; list-style: none; }
nav.toc ol ol { padding-left: 14px; }
nav.toc li { margin: 2px 0; } nav.toc a { color: #0969da; text-decoration: none; }
nav.toc a:hover { text-decoration: underline; } nav.toc .c a { color: var(--mark); font-weight: 600; }
nav.toc .more { color: var(--muted); }
@media (max-width: 900px) { body { padding-left: 24px; } nav.toc { position: static; width: auto; border: 1px solid var(--line); margin-top: 16px; } }
.bar { position: sticky; top: 0; z-index: 2; background: #f6f8fa; padding: 8px 0; border-bottom: 1px solid var(--line);
  display: none; gap: 8px; align-items: center; flex-wrap: wrap; font-size: 13px; }
.js .bar { display: flex; }
.bar input { font: inherit; padding: 3px 6px; width: 260px; } .bar button { font: inherit; }
.miss { display: none; }
.item, section.transcript { scroll-margin-top: 56px; }
.turn { border: 1px solid var(--line); border-left: 6px solid #9198a1; border-radius: 6px; margin: 12px 0;
  padding: 8px 14px; background: var(--asst); }
.turn.user { background: var(--user); border-left-color: #0969da; }
.turn.assistant { border-left-color: #1a7f37; }
.turn.tool { background: var(--tool); border-left-color: #9a6700; }
.turn.system { background: var(--sys); border-left-color: var(--mark); }
.turn.injected { background: var(--inj); border-left-color: #bf8700; border-style: dashed; }
.head { font-size: 12px; color: var(--muted); margin-bottom: 6px; }
.head .role { font-weight: 700; color: var(--fg); text-transform: uppercase; letter-spacing: .04em; margin-right: 6px; }
.head a { color: var(--muted); }
.badge { display: inline-block; font-size: 11px; padding: 0 6px; border-radius: 10px; background: #eaeef2;
  color: var(--fg); margin-left: 4px; }
.badge.inj { background: #f5e0a0; } .badge.err { background: #ffcecb; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; margin: 6px 0; }
.md { white-space: normal; } .md h1, .md h2, .md h3 { font-size: 16px; margin: 10px 0 4px; }
.md p { margin: 6px 0; } .md code { font: 12.5px ui-monospace, "SFMono-Regular", Menlo, monospace; background: #eff1f3;
  padding: 0 3px; border-radius: 3px; } .md pre code { background: none; padding: 0; }
.md table { border-collapse: collapse; } .md td, .md th { border: 1px solid var(--line); padding: 2px 6px; }
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
table.index { border-collapse: collapse; background: #fff; font-size: 13px; width: 100%; }
table.index td, table.index th { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
table.index td.n { text-align: right; white-space: nowrap; } table.index td.w { max-width: 420px; }
"""

#: where a page ends and the next begins when each page is its own file
PAGE_BREAK = "\x00page\x00"

#: how much of a user's words the table of contents shows
TOC_WORDS = 70
#: user turns listed per transcript in the contents of a dataset (each record is listed)
TOC_TURNS_PER_RECORD = 20


def esc(text: str) -> str:
    return escape(text, quote=True)


@cache
def _markdown() -> Any:
    """CommonMark with tables and strikethrough; raw HTML is text, unsafe links refused."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False, "xhtmlOut": False}).enable(["table", "strikethrough"]).disable("image")


def markdown_html(text: str) -> str:
    """An assistant's Markdown as HTML (every raw tag in it escaped)."""
    return str(_markdown().render(text))


def head(title: str, contents: bool = True) -> str:
    """The start of a page, to the opening of ``<main>`` (the bar with search, expand and
    collapse, and the pager); ``contents``: room at the side for the contents."""
    body = "<body>" if contents else "<body class=\"notoc\">"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<meta name=\"generator\" content=\"ctxtool export\"><title>{esc(title)}</title>"
        f"<style>{CSS}</style></head>\n{body}\n<h1>{esc(title)}</h1>\n"
        "<div class=\"bar\"><input id=\"q\" type=\"search\" placeholder=\"Search the transcript\" aria-label=\"search\">"
        "<span id=\"hits\"></span><button id=\"expand\" type=\"button\">Expand all</button>"
        "<button id=\"collapse\" type=\"button\">Collapse all</button><span id=\"pager\">"
        "<button id=\"prev\" type=\"button\">&#8592; previous</button> <span id=\"pageinfo\"></span> "
        "<button id=\"next\" type=\"button\">next &#8594;</button></span></div>\n<main>\n"
    )


def tail(toc: str) -> str:
    """The end of a page: the contents (placed at the side by the CSS) and the script."""
    return f"</main>\n{toc}<script>{SCRIPT}</script>\n</body></html>\n"


def _words(t: Turn) -> str:
    text = " ".join(p.text for p in t.parts if p.kind == "text").split()
    s = " ".join(text)
    return (s[:TOC_WORDS] + "…") if len(s) > TOC_WORDS else s or "(no text)"


@register
class HtmlRenderer(Renderer):
    name = "html"
    suffixes = (".html", ".htm")
    description = ("One self-contained HTML file: contents, pages, search, expand/collapse all (one inline script "
                   "its Content-Security-Policy allows; nothing fetched).")

    def __init__(self, options: Any, page_file: Callable[[int], str] | None = None) -> None:
        super().__init__(options)
        self.toc: list[str] = []
        self.page_turns = 0  # turns on the page being written
        self.pages = 0
        #: given: each page is its own file (this name for page n): links name the page's file, and
        #: :data:`PAGE_BREAK` in the body marks where the next file starts (see :func:`write_pages`)
        self.page_file = page_file
        self.records = 0

    def document(self, title: str, views: Iterator[ExportedTranscript]) -> Iterator[str]:
        yield head(title)
        yield from self.body(views)
        yield tail(self.contents(self.records))

    def body(self, views: Iterator[ExportedTranscript]) -> Iterator[str]:
        """The pages of ``views`` (between the head and the tail)."""
        for v in views:
            self.records += 1
            yield from self.transcript(self.records, v)
        if self.records == 0:
            yield "<p class=\"meta\">No transcript in this file.</p>\n"
        if self.pages:
            yield "</div>\n"

    def _href(self, anchor: str) -> str:
        return f"#{anchor}" if self.page_file is None else f"{self.page_file(max(self.pages, 1))}#{anchor}"

    def contents(self, records: int) -> str:
        what = plural(records, "record") if records > 1 else "user turns and compactions"
        return f"<nav class=\"toc\" id=\"toc\"><h2>Contents · {what}</h2>\n<ol>\n{''.join(self.toc)}</ol></nav>\n"

    def _page(self, turns: int) -> str:
        """Closes the page and opens the next when ``turns`` more would overfill it."""
        size = self.options.page_size
        out = ""
        if not self.pages or (size and self.page_turns and self.page_turns + max(turns, 1) > size):
            if self.pages:
                out += "</div>\n" + (PAGE_BREAK if self.page_file is not None else "")
            self.pages += 1
            self.page_turns = 0
            out += f"<div class=\"page\" id=\"page{self.pages}\">\n"
        self.page_turns += turns
        return out

    def transcript(self, k: int, v: ExportedTranscript) -> Iterator[str]:
        anchor = f"t{k}"
        dataset = k > 1 or "#" in v.label
        yield self._page(0)  # a record starts on a new page when this one is full
        record = self._href(anchor)
        yield f"<section class=\"transcript\" id=\"{anchor}\">\n"
        if dataset:
            yield f"<h2>{esc(short_label(v.label))}</h2>\n"
        ident = f" <code>{esc(v.id)}</code>" if v.id else ""
        marks = f", {plural(v.markers, 'compaction')}" if v.markers else ""
        yield f"<div class=\"meta\">{esc(v.format)} transcript{ident}: {plural(v.turns, 'message')}{marks}</div>\n"
        entries: list[str] = []
        users = 0
        for item in v.items:
            if isinstance(item, Marker):
                mid = f"{anchor}c{len(entries)}"
                entries.append(f"<li class=\"c\"><a href=\"{self._href(mid)}\">{esc(self._marker_title(item))}</a></li>\n")
                yield self.marker(item, mid)
                continue
            brk = self._page(1)
            if brk:
                yield "</section>\n" + brk + "<section class=\"transcript cont\">\n"
            if item.role == "user" and not item.injected:
                users += 1
                if not dataset or users <= TOC_TURNS_PER_RECORD:
                    entries.append(f"<li><a href=\"{self._href(f'{anchor}m{item.number}')}\">#{item.number} "
                                   f"{esc(_words(item))}</a></li>\n")
            yield self.turn(item, f"{anchor}m{item.number}")
        yield "</section>\n"
        if dataset:
            more = (f"<li class=\"more\">… {users - TOC_TURNS_PER_RECORD:,} more user turns</li>\n"
                    if users > TOC_TURNS_PER_RECORD else "")
            inner = f"<ol>{''.join(entries)}{more}</ol>" if entries else ""
            self.toc.append(f"<li><a href=\"{record}\">{esc(short_label(v.label))}</a> "
                            f"<span class=\"more\">{plural(v.turns, 'message')}</span>{inner}</li>\n")
        else:
            self.toc.extend(entries)

    def turn(self, t: Turn, anchor: str) -> str:
        cls = "item turn " + esc(t.role) + (" injected" if t.injected else "")
        head = [f"<span class=\"role\">{esc(ROLE_NAMES.get(t.role, t.role.title()))}</span>"
                f"<a href=\"#{anchor}\">#{t.number}</a>"]
        if t.injected:
            head.append(f"<span class=\"badge inj\">injected: {esc(t.injected)}</span>")
        if t.hidden:
            head.append(f"<span class=\"badge\">hidden from {esc(' and '.join(t.hidden))}</span>")
        for extra in (t.model, t.timestamp, f"line {t.line}" if t.line else None):
            if extra:
                head.append(f"<span class=\"badge\">{esc(extra)}</span>")
        body = "".join(self.part(p, t.role) for p in t.parts)
        return f"<div class=\"{cls}\" id=\"{anchor}\"><div class=\"head\">{' '.join(head)}</div>{body}</div>\n"

    def block(self, text: str, label: str, css: str = "") -> str:
        """Preformatted text under a label; past the collapse length, in a closed <details>."""
        pre = f"<pre class=\"{css}\">{esc(text)}</pre>" if css else f"<pre>{esc(text)}</pre>"
        if self.options.long(text):
            lines = text.count("\n") + 1
            return (f"<details><summary>{label} · {len(text):,} characters, {plural(lines, 'line')}</summary>"
                    f"{pre}</details>")
        return f"<div class=\"label\">{label}</div>{pre}"

    def part(self, p: TurnPart, role: str = "") -> str:
        k = p.kind
        if k == "text" and role == "system" and self.options.long(p.text):
            return (f"<details class=\"part\"><summary>System prompt · {len(p.text):,} characters</summary>"
                    f"<div class=\"text\">{esc(p.text)}</div></details>")
        if k == "text" and role == "assistant":
            return f"<div class=\"part text md\">{markdown_html(p.text)}</div>"
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

    @staticmethod
    def _marker_title(m: Marker) -> str:
        title = "Compaction boundary" if m.kind == "boundary" else "Compaction"
        return title + (f" ({m.tokens_before:,} tokens before)" if m.tokens_before is not None else "")

    def marker(self, m: Marker, anchor: str = "") -> str:
        bits = [m.trigger, f"{m.tokens_before:,} tokens before" if m.tokens_before is not None else None, m.timestamp,
                f"line {m.line}" if m.line else None]
        badges = "".join(f"<span class=\"badge\">{esc(b)}</span>" for b in bits if b)
        if m.kind == "notice":
            return (f"<div class=\"marker notice\"><span class=\"title\">{esc(m.title)}</span> {badges}"
                    f"<div class=\"text\">{esc(m.summary)}</div></div>\n")
        title = "Compaction boundary" if m.kind == "boundary" else "Compaction"
        ident = f" id=\"{anchor}\"" if anchor else ""
        out = f"<div class=\"item marker\"{ident}><span class=\"title\">{title}</span> {badges}"
        if m.summary:
            out += (f"<details><summary>Summary · {len(m.summary):,} characters</summary>"
                    f"<div class=\"text\">{esc(m.summary)}</div></details>")
        return out + "</div>\n"
