"""Reading a store: ``sessions``, ``show``, ``search``, ``lineage``.

Each command has ``--json`` giving exactly what the matching ``SessionDB`` method
returns, so scripts see the library's shapes.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click
from rich import box
from rich.cells import cell_len
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from hermes_store.cli.errors import CliError
from hermes_store.cli.output import console, echo_json, fmt_time
from hermes_store.cli.render import RenderOptions, clip, content_text, render_conversation
from hermes_store.cli.resolve import complete_session, resolve_session
from hermes_store.cli.target import StoreTarget, pass_target
from hermes_store.repository import messages as messages_repo

if TYPE_CHECKING:
    from hermes_store.api.session_db import SessionDB
    from hermes_store.repository.lineage import LineageNode

_HIGHLIGHT = "bold yellow"
_CONTEXT_CHARS = 100
_TITLE_CHARS = 32
_MIN_PREVIEW = 28
_MIN_TITLE = 12
_COLUMN_GAP = 3  # padding, divider, padding


def _offset(limit: int, page: int | None, offset: int | None) -> int:
    if page is not None and offset is not None:
        raise click.UsageError("give either --page or --offset, not both")
    if page is not None:
        return (page - 1) * limit
    return offset or 0


def _paging_options(func: Any) -> Any:
    func = click.option("--offset", type=click.IntRange(min=0), help="Skip this many results.")(func)
    func = click.option("--page", "-p", type=click.IntRange(min=1), help="Page number (1 = first).")(func)
    func = click.option(
        "--limit", "-n", type=click.IntRange(min=1), default=20, show_default=True, help="Results per page."
    )(func)
    return func


def _more_hint(shown: int, limit: int, offset: int, more: bool) -> str:
    """A "there is more" line, only when a row beyond this page exists."""
    if not more:
        return ""
    hint = f"Showing {offset + 1}–{offset + shown}; "
    if offset % limit == 0:
        return hint + f"next page: --page {offset // limit + 2}"
    return hint + f"next: --offset {offset + shown}"


def _flattened(value: str, limit: int) -> str:
    """``value`` on one line (every run of white space one space), clipped to ``limit``."""
    return clip(re.sub(r"\s+", " ", value).strip(), limit)


# --- sessions -------------------------------------------------------------------------


@click.command()
@click.option("--source", metavar="SOURCE", help="Only sessions from this source (cli, telegram, …).")
@click.option("--exclude-source", multiple=True, metavar="SOURCE", help="Leave out a source (repeatable).")
@click.option("--children", is_flag=True, help="Also list delegate and continuation sessions.")
@click.option(
    "--sort",
    type=click.Choice(["started", "active"]),
    default="started",
    show_default=True,
    help="Newest started first, or most recently active conversation first.",
)
@_paging_options
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
@pass_target
# Over 60 lines only by its signature (nine options); the body is one listing and its output.
def sessions(
    target: StoreTarget,
    source: str | None,
    exclude_source: tuple[str, ...],
    children: bool,
    sort: str,
    limit: int,
    page: int | None,
    offset: int | None,
    as_json: bool,
) -> None:
    """List recent sessions with their preview, title, source, model and activity."""
    start = _offset(limit, page, offset)
    with target.read_db() as db:
        rows = db.list_sessions_rich(
            source=source,
            exclude_sources=list(exclude_source) or None,
            # One row past the page says whether a next page exists.
            limit=limit + 1,
            offset=start,
            include_children=children,
            order_by_last_active=sort == "active",
        )
    more, rows = len(rows) > limit, rows[:limit]
    if as_json:
        echo_json(rows)
        return
    out = console()
    if not rows:
        out.print("No sessions." if start == 0 else "No more sessions.")
        return
    cells = [
        [
            str(row["id"]),
            _flattened(row.get("title") or "", _TITLE_CHARS),
            row.get("preview") or "",
            row.get("source") or "",
            row.get("model") or "",
            str(row.get("message_count") or 0),
            fmt_time(row.get("last_active")),
        ]
        for row in rows
    ]
    headers = ["ID", "Title", "Preview", "Source", "Model", "Msgs", "Last active"]
    widths = [max(cell_len(headers[i]), *(cell_len(line[i]) for line in cells)) for i in range(len(headers))]
    preview_width = _fit_columns(headers, widths, cells, out.width)
    table = Table(header_style="bold", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for index, header in enumerate(headers):
        table.add_column(
            header,
            no_wrap=True,
            overflow="ellipsis",
            justify="right" if header == "Msgs" else "left",
            style="cyan" if header == "ID" else None,
            max_width=preview_width if header == "Preview" else None,
            min_width=widths[index] if header in ("ID", "Last active") else None,
        )
    for line in cells:
        table.add_row(*line)
    out.print(table)
    hint = _more_hint(len(rows), limit, start, more)
    if hint:
        out.print(hint, style="dim")


def _fit_columns(headers: list[str], widths: list[int], cells: list[list[str]], width: int) -> int:
    """Fit the session table to ``width``; returns the preview column's width.

    The preview takes what the other columns leave. When that is too little the title
    is shortened first, then the model, source and title columns are dropped, in that
    order, so that ids and times always stay whole. Mutates the three lists.
    """

    def spare() -> int:
        others = sum(widths) - widths[headers.index("Preview")]
        return width - others - _COLUMN_GAP * (len(headers) - 1)

    title = headers.index("Title")
    widths[title] -= min(max(0, _MIN_PREVIEW - spare()), max(0, widths[title] - _MIN_TITLE))
    for droppable in ("Model", "Source", "Title"):
        if spare() >= _MIN_PREVIEW:
            break
        index = headers.index(droppable)
        del headers[index], widths[index]
        for line in cells:
            del line[index]
    if "Title" in headers:
        title = headers.index("Title")
        for line in cells:
            line[title] = _flattened(line[title], widths[title])
    return max(_MIN_PREVIEW, min(widths[headers.index("Preview")], spare()))


# --- show -------------------------------------------------------------------------------


@click.command()
@click.argument("session", metavar="ID|TITLE|PREFIX", shell_complete=complete_session)
@click.option("--ancestors", is_flag=True, help="Include the sessions this one continues, root first.")
@click.option("--full", is_flag=True, help="Show tool output and tool-call arguments whole.")
@click.option("--reasoning", is_flag=True, help="Show reasoning instead of folding it.")
@click.option("--json", "as_json", is_flag=True, help="Print the OpenAI-format replay as JSON.")
@pass_target
def show(
    target: StoreTarget, session: str, ancestors: bool, full: bool, reasoning: bool, as_json: bool
) -> None:
    """Show one conversation: roles, tool calls, tool output, folded reasoning."""
    with target.read_db() as db:
        session_id = resolve_session(db, session)
        if as_json:
            echo_json(db.get_messages_as_conversation(session_id, include_ancestors=ancestors))
            return
        chain = [node.id for node in db.get_ancestors(session_id)] if ancestors else [session_id]
        parts = []
        for member in chain or [session_id]:
            row = db.get_session(member)
            if row is not None:
                parts.append((row, db.get_messages(member)))
    out = console(wrap=True)
    for renderable in render_conversation(parts, RenderOptions(full=full, reasoning=reasoning)):
        out.print(renderable)


# --- search -------------------------------------------------------------------------------


def _snippet_text(snippet: str | None, query: str) -> Text:
    raw = re.sub(r"\s+", " ", snippet or "").strip()
    if ">>>" in raw:
        result = Text()
        for index, piece in enumerate(re.split(r">>>|<<<", raw)):
            result.append(piece, style=_HIGHLIGHT if index % 2 == 1 else None)
        return result
    result = Text(raw)
    words = [word.strip('"*') for word in query.split() if word.upper() not in ("AND", "OR", "NOT")]
    result.highlight_words([w for w in words if w], style=_HIGHLIGHT, case_sensitive=False)
    return result


def _has_previous(db: SessionDB, session_id: str, message_id: int) -> bool:
    with db.unit_of_work.read() as session:
        return messages_repo.has_earlier(session, session_id, message_id)


def _context_lines(db: SessionDB, hit: dict[str, Any]) -> list[Text]:
    context: list[dict[str, Any]] = hit.get("context") or []
    if not context:
        return []
    position = 1 if _has_previous(db, hit["session_id"], hit["id"]) else 0
    lines = []
    for index, entry in enumerate(context):
        if index == position:
            continue
        arrow = "↑" if index < position else "↓"
        line = Text(f"     {arrow} {entry.get('role')}: ", style="dim")
        line.append(_flattened(content_text(entry.get("content")), _CONTEXT_CHARS), style="dim")
        lines.append(line)
    return lines


@click.command()
@click.argument("query")
@click.option("--source", multiple=True, metavar="SOURCE", help="Only hits from this source (repeatable).")
@click.option("--exclude-source", multiple=True, metavar="SOURCE", help="Leave out a source (repeatable).")
@click.option("--role", multiple=True, metavar="ROLE", help="Only messages with this role (repeatable).")
@_paging_options
@click.option("--json", "as_json", is_flag=True, help="Print the hits as JSON.")
@pass_target
def search(
    target: StoreTarget,
    query: str,
    source: tuple[str, ...],
    exclude_source: tuple[str, ...],
    role: tuple[str, ...],
    limit: int,
    page: int | None,
    offset: int | None,
    as_json: bool,
) -> None:
    """Full-text search of messages, with highlighted snippets and their context.

    Words use the word index; CJK text of three or more characters uses the trigram
    index; shorter CJK terms are matched as substrings. Any query is accepted.
    """
    start = _offset(limit, page, offset)
    with target.read_db() as db:
        hits = db.search_messages(
            query,
            source_filter=list(source) or None,
            exclude_sources=list(exclude_source) or None,
            role_filter=list(role) or None,
            limit=limit + 1,  # one past the page says whether a next page exists
            offset=start,
        )
        more, hits = len(hits) > limit, hits[:limit]
        if as_json:
            echo_json(hits)
            return
        out = console(wrap=True)
        if not hits:
            if start:
                out.print(f"No messages match {query!r} from result {start + 1} on.")
            else:
                out.print(f"No messages match {query!r}.")
            return
        titles: dict[str, str | None] = {}
        for number, hit in enumerate(hits, start=start + 1):
            session_id = str(hit["session_id"])
            if session_id not in titles:
                titles[session_id] = db.get_session_title(session_id)
            head = Text(f"{number:>3}. ", style="bold")
            head.append(titles[session_id] or "(untitled)", style="bold")
            head.append(f"  {session_id}", style="cyan")
            head.append(f"  {hit.get('source') or '-'} · {hit.get('model') or '-'}", style="dim")
            out.print(head)
            line = Text("     ")
            line.append(str(hit.get("role")), style="bold")
            if hit.get("tool_name"):
                line.append(f" · {hit['tool_name']}")
            line.append(f"  {fmt_time(hit.get('timestamp'))}  ", style="dim")
            line.append_text(_snippet_text(hit.get("snippet"), query))
            out.print(line)
            for context_line in _context_lines(db, hit):
                out.print(context_line)
        hint = _more_hint(len(hits), limit, start, more)
        if hint:
            out.print(hint, style="dim")


# --- lineage ---------------------------------------------------------------------------------


def _kind(node: LineageNode, parent: LineageNode | None) -> str:
    if parent is None:
        return "root"
    after_end = parent.ended_at is not None and node.started_at >= parent.ended_at
    if parent.end_reason == "compression" and after_end:
        return "compression continuation"
    if parent.end_reason == "branched" and after_end:
        return "branch"
    return "delegate"


def _node_json(node: LineageNode, nodes: dict[str, LineageNode]) -> dict[str, Any]:
    parent = nodes.get(node.parent_session_id) if node.parent_session_id else None
    return {**dataclasses.asdict(node), "kind": _kind(node, parent)}


def _label(node: LineageNode, kind: str, selected: bool) -> Text:
    label = Text()
    label.append(node.id, style="bold cyan" if selected else "cyan")
    label.append(f"  {node.title}" if node.title else "  (untitled)", style="bold" if selected else None)
    label.append(f"  {fmt_time(node.started_at)}", style="dim")
    if node.ended_at is not None:
        label.append(f" → {fmt_time(node.ended_at)}", style="dim")
        label.append(f"  ended: {node.end_reason or '-'}", style="yellow")
    else:
        label.append("  live", style="green")
    if kind != "root":
        label.append(f"  [{kind}]", style="magenta")
    if selected:
        label.append("  ◀", style="bold")
    return label


@click.command()
@click.argument("session", metavar="ID|TITLE|PREFIX", shell_complete=complete_session)
@click.option("--json", "as_json", is_flag=True, help="Print ancestors and descendants as JSON.")
@pass_target
def lineage(target: StoreTarget, session: str, as_json: bool) -> None:
    """Show a session's ancestors and descendants as a tree, with end reasons."""
    with target.read_db() as db:
        session_id = resolve_session(db, session)
        ancestors = db.get_ancestors(session_id)
        descendants = db.get_descendants(session_id)
    if not ancestors:
        raise CliError(f"no session matches '{session}'")
    nodes = {node.id: node for node in (*ancestors, *descendants)}
    if as_json:
        echo_json(
            {
                "session": session_id,
                "ancestors": [_node_json(node, nodes) for node in ancestors[:-1]],
                "descendants": [_node_json(node, nodes) for node in descendants[1:]],
            }
        )
        return
    children: dict[str, list[LineageNode]] = {}
    for node in descendants[1:]:
        children.setdefault(node.parent_session_id or "", []).append(node)

    def kind_of(node: LineageNode) -> str:
        return _kind(node, nodes.get(node.parent_session_id) if node.parent_session_id else None)

    root = ancestors[0]
    tree = Tree(_label(root, kind_of(root), root.id == session_id))
    branch = tree
    for node in ancestors[1:]:
        branch = branch.add(_label(node, kind_of(node), node.id == session_id))

    def add_descendants(parent_branch: Tree, parent_id: str, seen: set[str]) -> None:
        for child in children.get(parent_id, []):
            if child.id in seen:
                continue
            seen.add(child.id)
            add_descendants(parent_branch.add(_label(child, kind_of(child), False)), child.id, seen)

    add_descendants(branch, session_id, {session_id})
    console().print(tree)


COMMANDS: Sequence[click.Command] = (sessions, show, search, lineage)
