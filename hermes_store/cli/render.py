"""Rendering conversations for people: rich terminal output and Markdown.

Both renderers take what :meth:`SessionDB.get_session` and :meth:`SessionDB.get_messages`
return. Tool calls are shown as ``→ name(arguments)``, tool output is cut to a few lines,
and reasoning is folded to one line unless asked for.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.rule import Rule
from rich.text import Text

from hermes_store.cli.output import fmt_cost, fmt_count, fmt_int, fmt_time

ROLE_STYLES = {
    "user": "bold cyan",
    "assistant": "bold green",
    "tool": "bold magenta",
    "system": "bold yellow",
}


@dataclass(frozen=True)
class RenderOptions:
    """How much of a conversation to show."""

    full: bool = False
    """Show tool output and tool-call arguments whole."""
    reasoning: bool = False
    """Show reasoning text instead of a folded one-line summary."""
    max_tool_lines: int = 12
    max_argument_chars: int = 300


def content_text(content: Any) -> str:
    """Readable text of decoded message content (string, multimodal list, dict …)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, bytes | bytearray):
        return bytes(content).decode("utf-8", errors="replace")
    if isinstance(content, list):
        pieces: list[str] = []
        for part in content:
            if isinstance(part, str):
                pieces.append(part)
            elif isinstance(part, dict):
                kind = str(part.get("type", "part"))
                if kind == "text" and isinstance(part.get("text"), str):
                    pieces.append(part["text"])
                else:
                    pieces.append(f"[{kind.removesuffix('_url')}]")
            else:
                pieces.append(json.dumps(part, ensure_ascii=False))
        return "\n".join(pieces)
    return json.dumps(content, ensure_ascii=False)


@dataclass(frozen=True)
class ToolCall:
    """One tool call of an assistant message, in display form."""

    name: str
    arguments: str
    call_id: str | None


def tool_calls_of(raw: Any) -> list[ToolCall]:
    """The tool calls in a decoded ``tool_calls`` value (OpenAI format or close to it)."""
    if not raw:
        return []
    items = raw if isinstance(raw, list) else [raw]
    calls: list[ToolCall] = []
    for item in items:
        if not isinstance(item, dict):
            calls.append(ToolCall("?", json.dumps(item, ensure_ascii=False), None))
            continue
        nested = item.get("function")
        function: dict[str, Any] = nested if isinstance(nested, dict) else item
        name = str(function.get("name") or item.get("name") or "?")
        arguments = function.get("arguments", item.get("arguments", ""))
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        call_id = item.get("id")
        calls.append(ToolCall(name, arguments, str(call_id) if call_id else None))
    return calls


def reasoning_text(message: Mapping[str, Any]) -> str:
    """The reasoning an assistant message carries (``reasoning`` or ``reasoning_content``)."""
    for key in ("reasoning", "reasoning_content"):
        value = message.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the last one an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clip_lines(text: str, max_lines: int) -> tuple[str, int]:
    lines = text.splitlines()
    if len(lines) <= max_lines:
        return text, 0
    return "\n".join(lines[:max_lines]), len(lines) - max_lines


# --- terminal -----------------------------------------------------------------------


def session_header(row: Mapping[str, Any]) -> RenderableType:
    """A few lines describing a session: title, id, source, model, times, tokens, cost."""
    title = row.get("title") or "(untitled)"
    lines = Text()
    lines.append(str(title), style="bold")
    lines.append(f"  {row['id']}\n", style="dim")
    lines.append(f"source {row.get('source') or '-'} · model {row.get('model') or '-'}")
    lines.append(f" · started {fmt_time(row.get('started_at'))}")
    if row.get("ended_at") is not None:
        lines.append(f" · ended {fmt_time(row.get('ended_at'))}")
        if row.get("end_reason"):
            lines.append(f" ({row['end_reason']})")
    else:
        lines.append(" · live")
    messages = fmt_count(row.get("message_count"), "message")
    counts = f"{messages} · {fmt_count(row.get('tool_call_count'), 'tool call')}"
    lines.append(
        f"\n{counts}"
        f" · tokens in {fmt_int(row.get('input_tokens'))} / out {fmt_int(row.get('output_tokens'))}"
        f" · cost {fmt_cost(row.get('actual_cost_usd') or row.get('estimated_cost_usd'))}"
    )
    if row.get("parent_session_id"):
        lines.append(f"\nparent {row['parent_session_id']}", style="dim")
    return lines


def render_message(message: Mapping[str, Any], options: RenderOptions) -> RenderableType:
    """One message: a role line, then its content, tool calls and folded reasoning."""
    role = str(message.get("role") or "?")
    head = Text()
    head.append(role, style=ROLE_STYLES.get(role, "bold"))
    if message.get("tool_name"):
        head.append(f" · {message['tool_name']}", style="magenta")
    head.append(f"  {fmt_time(message.get('timestamp'), seconds=True)}", style="dim")
    finish = message.get("finish_reason")
    if finish and finish != "stop":
        head.append(f"  [{finish}]", style="dim")
    parts: list[RenderableType] = [head]

    reasoning = reasoning_text(message)
    if reasoning:
        if options.reasoning:
            parts.append(Padding(Text(reasoning, style="dim italic"), (0, 0, 0, 2), expand=False))
        else:
            parts.append(
                Text(
                    f"  ▸ reasoning folded ({fmt_int(len(reasoning))} chars; --reasoning shows it)",
                    style="dim",
                )
            )

    body = content_text(message.get("content"))
    if role in ("user", "assistant"):
        body = body.strip()
    if role == "tool" and not options.full:
        body, hidden = _clip_lines(body, options.max_tool_lines)
        if hidden:
            body += f"\n… {hidden} more line{'s' if hidden != 1 else ''} (--full shows all)"
    if body:
        parts.append(Padding(Text(body), (0, 0, 0, 2), expand=False))

    for call in tool_calls_of(message.get("tool_calls")):
        arguments = call.arguments if options.full else clip(call.arguments, options.max_argument_chars)
        line = Text("  → ", style="magenta")
        line.append(call.name, style="bold magenta")
        line.append(f"({arguments})")
        parts.append(line)
    return Group(*parts)


def render_conversation(
    sessions: Iterable[tuple[Mapping[str, Any], list[dict[str, Any]]]], options: RenderOptions
) -> Iterable[RenderableType]:
    """Renderables for one or more sessions (an ancestor chain is several)."""
    first = True
    for row, messages in sessions:
        if not first:
            yield Rule(f"continued in {row['id']}", style="dim")
        first = False
        yield session_header(row)
        yield Text("")
        if not messages:
            yield Text("(no messages)", style="dim")
        for message in messages:
            yield render_message(message, options)
            yield Text("")


# --- Markdown ---------------------------------------------------------------------------


def _iso_utc(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))


def _fence(text: str, language: str = "") -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    marks = "`" * max(3, longest + 1)
    return f"{marks}{language}\n{text}\n{marks}"


def _pretty_arguments(arguments: str) -> tuple[str, str]:
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False, indent=2), "json"
    except (TypeError, ValueError):
        return arguments, ""


def markdown_session(row: Mapping[str, Any], messages: Iterable[Mapping[str, Any]]) -> str:
    """A session as a Markdown document (times in UTC, so the output is reproducible)."""
    out: list[str] = [f"# {row.get('title') or 'Session ' + str(row['id'])}", ""]
    out.append(f"- **Session:** `{row['id']}`")
    out.append(f"- **Source:** {row.get('source') or '-'} · **Model:** {row.get('model') or '-'}")
    ended = _iso_utc(row.get("ended_at"))
    if row.get("end_reason"):
        ended += f" ({row['end_reason']})"
    out.append(f"- **Started:** {_iso_utc(row.get('started_at'))} · **Ended:** {ended}")
    if row.get("parent_session_id"):
        out.append(f"- **Parent:** `{row['parent_session_id']}`")
    out.append(
        f"- **Messages:** {fmt_int(row.get('message_count'))} · "
        f"**Tokens:** {fmt_int(row.get('input_tokens'))} in / {fmt_int(row.get('output_tokens'))} out · "
        f"**Cost:** {fmt_cost(row.get('actual_cost_usd') or row.get('estimated_cost_usd'))}"
    )
    out.append("")
    for message in messages:
        role = str(message.get("role") or "?")
        heading = f"## {role}"
        if message.get("tool_name"):
            heading += f" · `{message['tool_name']}`"
        heading += f" · {_iso_utc(message.get('timestamp'))}"
        out += [heading, ""]
        reasoning = reasoning_text(message)
        if reasoning:
            out += ["<details><summary>Reasoning</summary>", "", reasoning, "", "</details>", ""]
        body = content_text(message.get("content"))
        if body.strip():
            out += [_fence(body) if role == "tool" else body.strip(), ""]
        for call in tool_calls_of(message.get("tool_calls")):
            arguments, language = _pretty_arguments(call.arguments)
            out += [f"**Tool call** `{call.name}`", "", _fence(arguments, language), ""]
    return "\n".join(out).rstrip("\n") + "\n"
