"""Plant secrets in a transcript file and grade a redacted copy, with rules that owe nothing to
ctxtool: the file is planted through its parsed JSON (standard library), each field class told
by its key, and the redacted copy is graded by searching its bytes for each planted value, its
base64 and its URL-encoded forms.

Run as a script for the table of kinds x fields over the samples and the corpus::

    python tests/redact_plant.py [FILE...]
"""

from __future__ import annotations

import base64
import json
import random
import string
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

ALNUM = string.ascii_letters + string.digits
#: the field classes a secret is planted in, by the key that holds it (see :func:`field_class`)
FIELDS = ("text", "thinking", "tool_args", "tool_output", "path", "raw")
#: leaves of each field class planted per file
PER_FIELD = 2
DENY = r"ACME-[0-9]{10}"
#: keys a reader needs as they are (ids, types, roles, links, times) or that hold binary
STRUCTURAL = frozenset({
    "type", "role", "id", "uuid", "parentUuid", "leafUuid", "logicalParentUuid", "sessionId", "session_id",
    "tool_use_id", "tool_call_id", "call_id", "toolCallId", "timestamp", "created_at", "createdAt", "model",
    "name", "stop_reason", "status", "version", "from", "subtype", "requestId", "media_type", "mimeType",
    "mime_type", "format", "schema_version", "agentId", "messageId", "parentId", "parentSession", "level",
    "userType", "signature", "encrypted_content", "thinkingSignature", "thoughtSignature", "data", "url",
    "image_url", "source", "kind", "event", "action_type", "observation_type", "finish_reason", "stop_sequence",
    "tool_call_ids", "step_id", "message_id", "instance_id", "turn_id", "item_id", "sample_id", "task_id",
    "epoch", "provider", "api", "stopReason", "cwdHash", "projectHash", "originator", "model_provider",
    "effort", "summary_mode", "approval_policy", "sandbox_policy", "mode", "slug", "gitBranch",
    "entrypoint", "permissionMode", "operation", "attachments", "metadata", "ctxtool", "command_name",
})
THINKING = frozenset({"thinking", "reasoning", "reasoning_content", "thought", "thoughts"})
PATHS = frozenset({"file_path", "path", "cwd", "filePath", "notebook_path", "filename", "workdir", "directory"})
TOOL_OUTPUT_TYPES = frozenset({"tool_result", "function_call_output", "custom_tool_call_output", "toolResult"})
TOOL_OUTPUT_ROLES = frozenset({"tool", "toolResult", "function", "observation", "ipython"})
TOOL_OUTPUT_KEYS = frozenset({"toolUseResult", "output", "observation", "stdout", "stderr", "result"})
TOOL_ARG_TYPES = frozenset({"tool_use", "function_call", "toolCall", "custom_tool_call", "tool_call"})
TOOL_ARG_KEYS = frozenset({"input", "arguments", "args", "parameters", "tool_calls", "function_call"})
TEXT_KEYS = frozenset({"text", "content", "value", "message", "prompt", "summary", "query"})


def _rand(rng: random.Random, chars: str, n: int) -> str:
    return "".join(rng.choice(chars) for _ in range(n))


def _b64url(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).decode().rstrip("=")


def _pem(rng: random.Random) -> tuple[str, list[str]]:
    body = [_rand(rng, ALNUM + "+/", 64) for _ in range(6)]
    return "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(body) + "\n-----END RSA PRIVATE KEY-----", body


@dataclass(frozen=True)
class Planted:
    """One secret planted: its kind, the field class it went into, the text planted and the
    values that must not survive (a key's body lines: each one)."""

    kind: str
    field: str
    text: str
    values: tuple[str, ...]


def secrets_for(rng: random.Random, field: str) -> list[Planted]:
    """One secret of every kind, fresh random values, each in the context people write it in."""
    out: list[Planted] = []

    def add(kind: str, text: str, *values: str) -> None:
        out.append(Planted(kind, field, text, values))

    v = "AKIA" + _rand(rng, string.ascii_uppercase + string.digits, 16)
    add("aws-access-key", f"export AWS_ACCESS_KEY_ID={v}", v)
    v = "ghp_" + _rand(rng, ALNUM, 36)
    add("github-token", f"GITHUB_TOKEN={v}", v)
    v = "glpat-" + _rand(rng, ALNUM, 20)
    add("gitlab-token", f"gitlab token {v}", v)
    v = f"xoxb-{_rand(rng, string.digits, 12)}-{_rand(rng, string.digits, 13)}-{_rand(rng, ALNUM, 24)}"
    add("slack-token", f"SLACK_BOT_TOKEN={v}", v)
    v = "sk_live_" + _rand(rng, ALNUM, 24)
    add("stripe-key", f"stripe.api_key = {v}", v)
    v = "sk-proj-" + _rand(rng, ALNUM, 20) + "T3BlbkFJ" + _rand(rng, ALNUM, 20)
    add("openai-key", f"OPENAI_API_KEY={v}", v)
    v = "sk-ant-api03-" + _rand(rng, ALNUM + "-_", 93) + "AA"
    add("anthropic-key", f"ANTHROPIC_API_KEY={v}", v)
    v = "AIza" + _rand(rng, ALNUM + "-_", 35)
    add("google-api-key", f"GEMINI_API_KEY={v}", v)
    head = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = _b64url(json.dumps({"sub": _rand(rng, string.digits, 10), "name": "x"}).encode())
    v = f"{head}.{body}.{_rand(rng, ALNUM + '-_', 43)}"
    add("jwt", f"Authorization: Bearer {v}", v)
    pem, lines = _pem(rng)
    add("private-key", pem, *lines)
    v = _rand(rng, ALNUM, 18)
    add("basic-auth-url", f"git clone https://deploy:{v}@git.example.com/acme/app.git", v)
    v = _rand(rng, ALNUM, 20)
    add("keyword-assignment", f'db_password = "{v}"', v)
    v = _rand(rng, ALNUM, 24)
    add("env-file-value", f"connected with {v} ok", v)
    v = "ACME-" + _rand(rng, string.digits, 10)
    add("deny-pattern", f"internal ticket {v}", v)
    v = "AKIA" + _rand(rng, string.ascii_uppercase + string.digits, 16)
    add("base64-encoded", base64.b64encode(f"AWS_ACCESS_KEY_ID={v}\n".encode()).decode(), v)
    v = _rand(rng, ALNUM, 18)
    add("url-encoded", "next=" + quote(f"https://svc:{v}@api.example.com/login", safe=""), v)
    return out


#: kinds planted as a field of their own rather than in text
FIELD_KINDS = ("keyword-json-field",)


def forms(value: str) -> set[str]:
    """How a value may survive in JSON bytes: as is, JSON-escaped, URL-encoded, base64."""
    out = {value, json.dumps(value)[1:-1], quote(value, safe=""), quote(value)}
    b = value.encode()
    out |= {base64.b64encode(b).decode().rstrip("="), base64.urlsafe_b64encode(b).decode().rstrip("=")}
    return out


def field_class(path: tuple[Any, ...], ctx: frozenset[str]) -> str | None:
    """The field class of a string leaf at ``path`` (keys from the root), ``ctx`` the classes
    the dicts around it declare (a tool result, a tool call, thinking)."""
    key = next((k for k in reversed(path) if isinstance(k, str)), None)
    if key in STRUCTURAL or any(isinstance(k, str) and k in STRUCTURAL for k in path):
        return None
    if key in PATHS:
        return "path"
    if "thinking" in ctx or any(k in THINKING for k in path):
        return "thinking"
    if "tool_output" in ctx or any(k in TOOL_OUTPUT_KEYS for k in path):
        return "tool_output"
    if "tool_args" in ctx or any(k in TOOL_ARG_KEYS for k in path):
        return "tool_args"
    if key in TEXT_KEYS:
        return "text"
    return "raw"


def _ctx(d: dict[str, Any], ctx: frozenset[str]) -> frozenset[str]:
    t, role = d.get("type"), d.get("role")
    t, role = (t if isinstance(t, str) else None), (role if isinstance(role, str) else None)
    add = set()
    if t in TOOL_OUTPUT_TYPES or role in TOOL_OUTPUT_ROLES:
        add.add("tool_output")
    if t in TOOL_ARG_TYPES:
        add.add("tool_args")
    if t in ("thinking", "reasoning"):
        add.add("thinking")
    return ctx | add if add else ctx


def _eligible(s: str) -> bool:
    if len(s) < 3 or s.startswith("data:") or len(s) > 200_000:
        return False
    return not all(c in ALNUM + "-:.+/=_" for c in s) or "/" in s or len(s) > 40


class Planter:
    """Plants ``PER_FIELD`` leaves of each field class of one file (walk order), each with
    one fresh secret of every kind appended on lines of its own."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.left = dict.fromkeys(FIELDS, PER_FIELD)
        self.fields = PER_FIELD
        self.planted: list[Planted] = []

    def value(self, o: Any, path: tuple[Any, ...], ctx: frozenset[str]) -> Any:
        if isinstance(o, dict):
            ctx = _ctx(o, ctx)
            for k in list(o):
                o[k] = self.value(o[k], (*path, k), ctx)
            if path and path[-1] in TOOL_ARG_KEYS and self.fields > 0:  # a tool's arguments: a field of their own
                self.fields -= 1
                v = _rand(self.rng, ALNUM, 20)
                o["db_password"] = v
                self.planted.append(Planted("keyword-json-field", "tool_args", v, (v,)))
            return o
        if isinstance(o, list):
            for i, v in enumerate(o):
                o[i] = self.value(v, (*path, i), ctx)
            return o
        if isinstance(o, str) and _eligible(o):
            inner = _json_text(o)
            if inner is not None:  # JSON inside a string (OpenAI arguments): planted inside
                return json.dumps(self.value(inner, path, ctx))
            fc = field_class(path, ctx)
            if fc is not None and self.left[fc] > 0:
                self.left[fc] -= 1
                batch = secrets_for(self.rng, fc)
                self.planted.extend(batch)
                return o + "\n" + "\n".join(p.text for p in batch) + "\n"
        return o


def _json_text(s: str) -> Any:
    if s[:1] not in "{[":
        return None
    try:
        v = json.loads(s)
    except ValueError:
        return None
    return v if isinstance(v, (dict, list)) else None


def plant(src: Path, dst: Path, seed: int = 36) -> list[Planted]:
    """``src`` with secrets planted, written to ``dst`` (JSON Lines stay lines; a document
    is written indented); the secrets planted."""
    raw = src.read_bytes()
    p = Planter(seed)
    try:
        doc = json.loads(raw)
    except ValueError:
        lines = [json.loads(x) for x in raw.splitlines() if x.strip()]
        out = [p.value(o, (), frozenset()) for o in lines]
        dst.write_bytes(b"".join(json.dumps(o, ensure_ascii=False).encode() + b"\n" for o in out))
    else:
        dst.write_bytes(json.dumps(p.value(doc, (), frozenset()), ensure_ascii=False, indent=2).encode() + b"\n")
    return p.planted


def env_file(planted: list[Planted], path: Path) -> Path:
    """The env file that lists the ``env-file-value`` secrets (for ``--secrets-from``)."""
    rows = [f"SERVICE_TOKEN_{i}={x.values[0]}" for i, x in enumerate(planted) if x.kind == "env-file-value"]
    path.write_text("# planted\nPORT=8080\n" + "\n".join(rows) + "\n")
    return path


def survivors(planted: list[Planted], data: bytes) -> list[Planted]:
    """The planted secrets some form of which is still in ``data``."""
    text = data.decode("utf-8", "replace")
    return [x for x in planted if any(f in text for v in x.values for f in forms(v))]


def redact_args(env: Path) -> list[str]:
    return ["--secrets-from", str(env), "--deny", DENY]


def grade(files: list[Path], work: Path, run: Callable[[list[str]], None]) -> Iterator[tuple[Path, list[Planted], list[Planted]]]:
    """For each file: plant, redact through ``run`` (the ctxtool command line), and yield the
    secrets planted and those that survived."""
    for i, f in enumerate(files):
        planted_path = work / f"planted{i}{''.join(f.suffixes[-1:])}"
        planted = plant(f, planted_path, seed=i)
        env = env_file(planted, work / f"planted{i}.env")
        out = work / f"redacted{i}{''.join(f.suffixes[-1:])}"
        run(["redact", str(planted_path), "-o", str(out), *redact_args(env)])
        yield f, planted, survivors(planted, out.read_bytes())


def false_positives(files: list[Path], run: Callable[[list[str]], str]) -> dict[str, Any]:
    """``redact --check --json`` over files as they are (no secret planted: the corpus was
    checked for keys, tokens and private keys when it was gathered, so every finding counts as
    a false positive): findings and distinct values per kind, and the strings scanned."""
    kinds: dict[str, list[int]] = {}
    per_file: dict[str, int] = {}
    total_bytes = 0
    for f in files:
        d = json.loads(run(["redact", str(f), "--check", "--json"]))
        total_bytes += f.stat().st_size
        for k, v in d["totals"]["kinds"].items():
            cell = kinds.setdefault(k, [0, 0])
            cell[0] += v["secrets"]
            cell[1] += v["findings"]
        if d["totals"]["secrets"]:
            per_file[f.name] = d["totals"]["secrets"]
    distinct = sum(c[0] for c in kinds.values())
    return {"files": len(files), "bytes": total_bytes, "distinct": distinct,
            "findings": sum(c[1] for c in kinds.values()), "kinds": kinds, "per_file": per_file}


def main(argv: list[str]) -> int:
    import tempfile

    root = Path(__file__).resolve().parent.parent
    if argv[:1] == ["--false-positives"]:
        corpus = [Path(a) for a in argv[1:]] or sorted(
            p for p in (root.parent / "shared" / "corpus").rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl", ".traj"))

        def out(args: list[str]) -> str:
            r = subprocess.run([sys.executable, "-m", "ctxtool", *args], capture_output=True, text=True)
            return r.stdout

        fp = false_positives(corpus, out)
        print(json.dumps(fp, indent=1))
        mb = fp["bytes"] / 1e6
        print(f"false positives: {fp['distinct']} distinct values, {fp['findings']} occurrences, in "
              f"{fp['files']} files ({mb:.1f} MB): {fp['distinct'] / mb:.2f} distinct per MB")
        return 0
    files = [Path(a) for a in argv] or sorted(
        [p for p in (root / "samples").glob("*.json*")]
        + [p for p in (root.parent / "shared" / "corpus").rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl", ".traj")])

    def run(args: list[str]) -> None:
        subprocess.run([sys.executable, "-m", "ctxtool", *args], check=True, capture_output=True)

    table: dict[tuple[str, str], list[int]] = {}
    with tempfile.TemporaryDirectory() as d:
        for f, planted, left in grade(files, Path(d), run):
            for x in planted:
                cell = table.setdefault((x.kind, x.field), [0, 0])
                cell[0 if x not in left else 1] += 1
            print(f"{f.name}: {len(planted)} planted, {len(left)} survived", file=sys.stderr)
    order = [p.kind for p in secrets_for(random.Random(0), "")] + list(FIELD_KINDS)
    kinds = sorted({k for k, _ in table}, key=order.index)
    print("| kind | " + " | ".join(FIELDS) + " |")
    print("|---" * (len(FIELDS) + 1) + "|")
    for k in kinds:
        cells = [table.get((k, f)) for f in FIELDS]
        print(f"| {k} | " + " | ".join(f"{c[0]}/{c[0] + c[1]}" if c else "-" for c in cells) + " |")
    missed = sum(c[1] for c in table.values())
    print(f"\nfound/planted per cell; missed in total: {missed}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
