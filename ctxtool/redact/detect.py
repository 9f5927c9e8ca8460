"""What is a secret, and what replaces it. :class:`Detector` finds secrets in a string
(detect-secrets' plugins and filters, the keys of :mod:`ctxtool.redact.plugins`, env-file values,
``--deny``; ``--allow`` drops false positives), inside base64 and URL-encoded text too.
:class:`Secrets` is a run's table: one typed placeholder per secret (``[REDACTED:kind#N]``), for
every encoded form of it."""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus

from ..errors import CtxtoolError, Failure

#: the kind of an exact value from an env file, and of a --deny match
KIND_ENV = "env-value"
KIND_DENY = "denied"
#: how every placeholder begins: what holds one is ours, not a secret (a redacted file checks clean)
PLACEHOLDER = "[REDACTED:"
#: a secret shorter than this is not one (a keyword assignment of "x"): it would replace
#: every such word of the transcript
MIN_SECRET = 6
#: env values shorter than this are left alone (ports, flags, "true")
MIN_ENV_VALUE = 6
#: what detect-secrets is told the text is: no extension, so its keyword plugin asks for a
#: quoted value (its rule for code and unknown files)
SCAN_NAME = "transcript"
#: encoded runs longer than this are data (an image, an archive), not text that hides a key
MAX_DECODE = 1 << 16

#: the object ids providers give messages, tool calls and responses (Anthropic's ``toolu_…``,
#: ``msg_…``, also through Bedrock and Vertex; OpenAI's ``call_…``, ``chatcmpl-…``, ``resp_…``):
#: names, never secrets, though random enough for the high-entropy plugins
PROVIDER_ID = re.compile(r"(?:(?:srvtoolu|toolu|msg|call|fc|rs|resp|run|req)_(?:bdrk_|vrtx_)?|chatcmpl-)[A-Za-z0-9]{8,}")
_B64_RUN = re.compile(r"[A-Za-z0-9+/_-]{20,}={0,2}")
_PCT = re.compile(r"%[0-9A-Fa-f]{2}")
_PEM = re.compile(r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----")
_PEM_BODY = re.compile(r"(?:[A-Za-z0-9+/=:,. -]|\s|\\[nr])*")
_PUTTY = re.compile(r"PuTTY-User-Key-File-\d: .*?(?:Private-MAC: [0-9a-fA-F]+|\Z)", re.S)
_JWT_TAIL = re.compile(r"[A-Za-z0-9_=+/.-]*")
_SLUG = re.compile(r"[^a-z0-9]+")


def slug(secret_type: str) -> str:
    """A placeholder's kind from a detect-secrets type: ``AWS Access Key`` -> ``aws-access-key``."""
    return _SLUG.sub("-", secret_type.lower()).strip("-") or "secret"


@dataclass(frozen=True)
class RedactOptions:
    """What ``redact`` (and ``export --redact``, ``convert --redact``) looks for and changes.

    ``secrets_from``: env files whose every value is a secret; ``deny``: regular expressions
    whose matches are secrets (the first group when the pattern has one); ``allow``: regular
    expressions a found value may match (``re.search``) to be left alone; ``detectors``:
    detect-secrets' plugins on (off: only the env values and ``deny``); ``drop_binary``:
    base64 images and documents replaced by a placeholder (else listed, not scanned);
    ``keep_signatures``: keep thinking signatures and encrypted reasoning or compaction blobs
    (dropped by default: they cannot be verified after an edit, and cannot be scanned)."""

    secrets_from: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()
    detectors: bool = True
    drop_binary: bool = False
    keep_signatures: bool = False

    def fingerprint(self) -> str:
        """What a redaction's output depends on, for a sharded run's settings (a re-run with the
        same options and env files resumes): these options and a sha256 of each ``secrets_from``
        file's bytes (a digest: never the values)."""
        h = hashlib.sha256(repr(self).encode("utf-8", "surrogatepass"))
        for p in self.secrets_from:
            try:
                h.update(hashlib.sha256(Path(p).read_bytes()).digest())
            except OSError:
                h.update(b"\0unreadable")
        return h.hexdigest()


def env_values(path: str) -> list[str]:
    """Every value of an env file (``KEY=VALUE`` lines, ``export`` and quotes allowed,
    comments and blank lines skipped), shortest first dropped below :data:`MIN_ENV_VALUE`."""
    try:
        text = Path(path).read_text("utf-8", errors="replace")
    except FileNotFoundError:
        raise CtxtoolError("no such file (--secrets-from)", kind=Failure.NOT_FOUND, path=path) from None
    except OSError as e:
        raise CtxtoolError(f"cannot read --secrets-from: {e.strerror or e}", kind=Failure.INPUT, path=path) from None
    out = []
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("#") or "=" not in s:
            continue
        s = s.removeprefix("export ").strip()
        value = s.split("=", 1)[1].strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        if len(value) >= MIN_ENV_VALUE:
            out.append(value)
    return out


def _patterns(patterns: tuple[str, ...], flag: str) -> list[re.Pattern[str]]:
    out = []
    for p in patterns:
        try:
            out.append(re.compile(p))
        except re.error as e:
            raise CtxtoolError(f"{flag} {p!r}: not a regular expression ({e})", kind=Failure.USAGE) from None
    return out


class Detector:
    """Finds secrets in strings (:meth:`find`). A context manager: detect-secrets' settings
    (every built-in plugin, ours, its default filters) hold while it is open, and are put
    back as they were after (``transient_settings``)."""

    def __init__(self, options: RedactOptions) -> None:
        self.options = options
        self.env = sorted({v for p in options.secrets_from for v in env_values(p)}, key=len, reverse=True)
        self.deny = _patterns(options.deny, "--deny")
        self.allow = _patterns(options.allow, "--allow")
        self._stack = contextlib.ExitStack()
        self._scan: Any = None

    def __enter__(self) -> Detector:
        if self.options.detectors:
            self._scan = self._stack.enter_context(_detect_secrets())
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()
        self._scan = None

    def find(self, s: str) -> Iterator[tuple[str, str]]:
        """``(kind, value)`` of each secret in ``s``, then of each one found only once its
        base64 runs or URL escapes are decoded."""
        yield from self._plain(s)
        for decoded in _decodings(s):
            yield from self._plain(decoded)

    def _plain(self, s: str) -> Iterator[tuple[str, str]]:
        for v in self.env:
            if v in s:
                yield KIND_ENV, v
        for rx in self.deny:
            for m in rx.finditer(s):
                v = m.group(1) if rx.groups else m.group(0)
                if v and not self._allowed(v):
                    yield KIND_DENY, v
        if self._scan is not None:
            for kind, v in self._scan(s):
                if len(v) >= MIN_SECRET and PLACEHOLDER not in v and not self._allowed(v):
                    yield kind, v

    def names_secret(self, key: str) -> bool:
        """Whether a key names a secret, by detect-secrets' keyword plugin's word list."""
        return self._scan is not None and keywords().search(key) is not None

    def _allowed(self, v: str) -> bool:
        return PROVIDER_ID.fullmatch(v) is not None or any(rx.search(v) for rx in self.allow)


@contextlib.contextmanager
def _detect_secrets() -> Iterator[Any]:
    """detect-secrets set up as this module uses it; yields ``scan(text)`` -> (kind, value)."""
    try:
        import detect_secrets  # noqa: F401
    except ImportError as e:  # an environment built before redact came (make rebuilds it from the lock)
        raise CtxtoolError(
            f"redact needs detect-secrets ({e.name} is missing), a dependency of ctxtool: from a checkout, `make run` "
            f"rebuilds .venv from requirements.lock; elsewhere `pip install detect-secrets`",
            kind=Failure.DEPENDENCY) from None
    from detect_secrets.core.plugins.initialize import from_file
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.core.scan import _process_line_based_plugins
    from detect_secrets.settings import get_plugins, transient_settings

    # lazy: start-up (loaded only when this runs: .)
    from . import plugins as own

    with transient_settings({"plugins_used": []}) as settings:
        classes: list[Any] = [*get_mapping_from_secret_type_to_class().values(), *from_file(own.__file__)]
        settings.configure_plugins([{"name": c.__name__} for c in {c.__name__: c for c in classes}.values()])
        # the keyword plugin last: the others are quicker to rule a text in
        plugins = sorted(get_plugins(), key=lambda p: type(p).__name__ == "KeywordDetector")
        by_type = {p.secret_type: p for p in plugins}

        def scan(text: str) -> Iterator[tuple[str, str]]:
            lines = text.splitlines()
            if not lines or not _candidate(plugins, text):
                return
            # the library's own loop over lines (line filters, each plugin, secret and context
            # filters), run on the lines some plugin may find something in, with their context
            for part in _windows(lines, [i for i, ln in enumerate(lines) if _candidate(plugins, ln)]):
                for found in _process_line_based_plugins(list(enumerate(part, 1)), filename=SCAN_NAME):
                    yield from _found(found, text, by_type.get(found.type))

        yield scan


@functools.cache
def keywords() -> re.Pattern[str]:
    """The words detect-secrets' keyword plugin looks for (``password``, ``api_key``,
    ``secret`` ...), in any case."""
    from detect_secrets.plugins.keyword import DENYLIST_REGEX

    return re.compile(DENYLIST_REGEX, re.I)


#: lines of context detect-secrets' filters look at around a line (its code snippet)
CONTEXT = 5


def _candidate(plugins: list[Any], text: str) -> bool:
    """Whether any plugin's own matching finds something in ``text`` (a high-entropy string
    only above the plugin's limit): what is not a candidate holds nothing the plugins report.
    Their patterns do not cross lines, so a text holds a candidate when one of its lines does.
    The keyword plugin (the slowest, last) is asked only about a text that holds one of its
    words."""
    from detect_secrets.plugins.high_entropy_strings import HighEntropyStringsPlugin
    from detect_secrets.plugins.keyword import KeywordDetector

    for p in plugins:
        if isinstance(p, KeywordDetector):
            if keywords().search(text) is not None and next(iter(p.analyze_string(text)), None) is not None:
                return True
        elif isinstance(p, HighEntropyStringsPlugin):
            if any(p.calculate_shannon_entropy(v) > p.entropy_limit for v in p.analyze_string(text)):
                return True
        elif next(iter(p.analyze_string(text)), None) is not None:
            return True
    return False


def _whole_matches(plugin: Any, text: str, value: str) -> Iterator[str]:
    """The whole matches of a regex plugin whose pattern's first group (the one a regex
    plugin reports) is only the prefix of its match: detect-secrets 1.5 reports ``ghp`` for a
    GitHub token and ``glpat`` for a GitLab one."""
    for rx in getattr(plugin, "denylist", ()):
        if not rx.groups:
            continue
        for m in rx.finditer(text):
            if m.group(1) == value and m.start(1) == m.start() and m.end(1) < m.end():
                yield m.group(0)


def _windows(lines: list[str], hits: list[int]) -> Iterator[list[str]]:
    """The runs of ``lines`` around each hit, :data:`CONTEXT` lines either side, merged."""
    start = end = -1
    for i in hits:
        lo, hi = max(0, i - CONTEXT), i + CONTEXT + 1
        if lo > end:
            if end > start:
                yield lines[start:end]
            start = lo
        end = hi
    if end > start:
        yield lines[start:end]


def _found(found: Any, text: str, plugin: Any) -> Iterator[tuple[str, str]]:
    value = found.secret_value
    if not value:
        return
    whole = list(_whole_matches(plugin, text, value))
    if whole:  # the plugin reported the group that opens its match (GitHub's "ghp"): the match
        yield from ((slug(found.type), w) for w in whole)
        return
    if found.type == "Private Key":
        yield from (("private-key", block) for block in private_keys(text))
        return
    if found.type == "JSON Web Token":  # the plugin's pattern stops before the signature
        at = text.find(value)
        if at >= 0:
            value += _JWT_TAIL.match(text, at + len(value)).group(0)  # type: ignore[union-attr]
    yield slug(found.type), value


def private_keys(text: str) -> Iterator[str]:
    """Each private key of ``text`` whole, from its BEGIN line to its END line (to the end
    of its body when cut short), newlines as they are written (real, or ``\\n`` in JSON
    text); a PuTTY key through its MAC. A BEGIN line without a key body is not a key."""
    for m in _PEM.finditer(text):
        end_marker = f"-----END {m.group(1)}-----"
        stop = text.find(end_marker, m.end(), m.end() + 20_000)
        if stop >= 0:
            block = text[m.start() : stop + len(end_marker)]
        else:
            body = _PEM_BODY.match(text, m.end())
            block = text[m.start() : body.end() if body else m.end()].rstrip()
        if sum(c.isalnum() for c in block) - len(m.group(0)) >= 40:
            yield block
    for m in _PUTTY.finditer(text):
        yield m.group(0)


def _decodings(s: str) -> Iterator[str]:
    """The text hidden in ``s``: each base64 run that decodes to text, and ``s`` with its
    URL escapes decoded."""
    for m in _B64_RUN.finditer(s):
        run = m.group(0)
        if len(run) > MAX_DECODE:
            continue
        for skip in range(4):  # the run may begin with a letter of the text before it ("\\n" in JSON text)
            text = _b64_text(run[skip:])
            if text is not None:
                yield text
                break
    if "%" in s and _PCT.search(s):
        for decoded in {unquote(s), unquote_plus(s)}:
            if decoded != s:
                yield decoded


def _b64_text(run: str) -> str | None:
    raw = run.rstrip("=")
    try:
        data = base64.b64decode(raw.replace("-", "+").replace("_", "/") + "=" * (-len(raw) % 4), validate=True)
        text = data.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    printable = sum(c.isprintable() or c in "\n\r\t" for c in text)
    return text if text and printable >= 0.95 * len(text) else None


def encoded_forms(value: str) -> set[str]:
    """How ``value`` may be written elsewhere: JSON-escaped, URL-encoded (each common way,
    both hex cases) and base64 (standard and URL-safe, at each of the three alignments a
    longer encoded text may hold it, without the characters that depend on its neighbours)."""
    forms = {json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1]}
    for q in (quote(value, safe=""), quote(value, safe="/:@"), quote_plus(value, safe="")):
        forms.add(q)
        forms.add(_PCT.sub(lambda m: m.group(0).lower(), q))
    data = value.encode("utf-8", "surrogatepass")
    for k in range(3):
        enc = base64.b64encode(b"\0" * k + data).decode("ascii")
        middle = enc[-(-8 * k // 6) : (8 * (k + len(data))) // 6]
        if len(middle) >= 12:
            forms.add(middle)
            forms.add(middle.replace("+", "-").replace("/", "_"))
    forms.discard(value)
    return {f for f in forms if len(f) >= MIN_SECRET}


class Secrets:
    """A run's secrets: each one's placeholder, numbered per kind in the order found (the
    same secret, in any of its forms, gets the same placeholder everywhere in the run)."""

    def __init__(self) -> None:
        self.placeholder: dict[str, str] = {}  # a secret or one of its forms -> its placeholder
        self.kind_of: dict[str, str] = {}  # placeholder -> kind
        self.numbers: dict[str, int] = {}
        self._rx: re.Pattern[str] | None = None

    def __len__(self) -> int:
        return len(self.kind_of)

    def add(self, kind: str, value: str) -> bool:
        """Give ``value`` a placeholder (False: it had one)."""
        if value in self.placeholder:
            return False
        n = self.numbers.get(kind, 0) + 1
        self.numbers[kind] = n
        ph = f"{PLACEHOLDER}{kind}#{n}]"
        self.kind_of[ph] = kind
        self.placeholder[value] = ph
        for form in encoded_forms(value):
            self.placeholder.setdefault(form, ph)
        self._rx = None
        return True

    def sub(self, s: str) -> tuple[str, list[str]]:
        """``s`` with every known secret replaced, and the placeholders put in (in order)."""
        if not self.placeholder:
            return s, []
        rx = self._rx
        if rx is None:
            rx = self._rx = re.compile(trie_pattern(self.placeholder))
        put: list[str] = []

        def one(m: re.Match[str]) -> str:
            ph = self.placeholder[m.group(0)]
            put.append(ph)
            return ph

        out = rx.sub(one, s)
        return out, put


def trie_pattern(words: Any) -> str:
    """One regular expression matching any of ``words``, longest first at each place: a
    trie written as nested groups (a run of single letters written as one literal), which
    ``re`` matches in time that grows with the text, not with the number of words."""
    root: dict[str, Any] = {}
    for w in words:
        node = root
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict[str, Any]) -> str:
        alts = []
        for ch in sorted(k for k in node if k):
            child, lit = node[ch], ch
            while len(child) == 1 and "" not in child:
                (nxt, child), = child.items()
                lit += nxt
            alts.append(re.escape(lit) + emit(child))
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        if "" in node:
            return f"(?:{body})?"
        return body

    return emit(root)
