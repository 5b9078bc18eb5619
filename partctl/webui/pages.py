"""The cluster page's HTML, rendered on the server from a
:class:`~partctl.cluster_view.ClusterView`: pure functions of what was read, no JavaScript (a
``<meta http-equiv="refresh">`` reloads it), every string from the cluster HTML-escaped (topic
names, racks, hosts, group ids, log lines, error messages).

The overview stays small for any cluster size: the brokers, one row per topic, the
reassignments and the partitions in trouble (the first :data:`MAX_ROWS` of each, then a count);
every partition of a topic is on the topic's own page.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape
from urllib.parse import quote

from partctl.cluster_view import ClusterView, PartitionView
from partctl.render import human_bytes
from partctl.render import id_list_text as _ids

MAX_ROWS = 200
"""Rows of a list on the overview before "and N more"."""
MAX_TOPIC_ROWS = 10_000
"""Partitions listed on a topic's page."""

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#1d2330}
table{border-collapse:collapse;margin:.5em 0 1.5em}
th,td{border:1px solid #c9ced8;padding:.2em .6em;text-align:left}
th{background:#eef1f6} td.n{text-align:right}
.bad{color:#b00020;font-weight:bold} .ok{color:#1b7f3b}
.counts span{margin-right:1.5em} nav a{margin-right:1em}
form{display:inline} .note{color:#8a5a00}
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class PageOptions:
    refresh: float = 0
    """Seconds between reloads (meta refresh); 0: none."""
    actions: bool = False
    """Show the forms of the actions (preferred election, cancel a reassignment)."""
    plan: bool = False
    """A plan was given: link its before/after picture."""
    plots: bool = False
    """matplotlib is there: show the pictures."""


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def page(title: str, body: str, options: PageOptions) -> str:
    """A whole document around ``body`` (already HTML)."""
    refresh = (f'<meta http-equiv="refresh" content="{options.refresh:g}">'
               if options.refresh else "")
    plan = '<a href="/plan">Plan</a>' if options.plan else ""
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">{refresh}'
            f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>"
            f'<nav><a href="/">Overview</a><a href="/groups">Consumer groups</a>'
            f"{plan}</nav>"
            f"<h1>{_e(title)}</h1>{body}</body></html>")


def _table(head: Sequence[str], rows: Iterable[str], *, id_: str) -> str:
    cells = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join(rows)
    return f'<table id="{id_}"><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>'


def _more(total: int, shown: int) -> str:
    return f"<p>and {total - shown} more</p>" if total > shown else ""


def _count(label: str, n: int, id_: str) -> str:
    return f'<span id="{id_}" class="{"bad" if n else "ok"}">{_e(label)}: {n}</span>'


def overview(view: ClusterView, options: PageOptions, *, state_changes: Sequence[str] | None = None
             ) -> str:
    """The cluster page: counts, brokers, topics, reassignments, partitions in trouble, the
    controller's recent state changes (when a log was given) and the load picture."""
    controller = ("none" if view.controller is None
                  else f"broker {view.controller}, epoch {view.controller_epoch}")
    out = [f'<p id="summary">Controller: {_e(controller)}. Brokers: {len(view.live_brokers)} '
           f"live of {len(view.brokers)}. {len(view.topics)} topics, {len(view.partitions)} "
           f"partitions. Read at {view.taken_at:%Y-%m-%d %H:%M:%S} UTC.</p>",
           '<p class="counts">',
           _count("Offline partitions", view.offline, "offline"),
           _count("Under-replicated", view.under_replicated, "under-replicated"),
           _count("Under min ISR", view.under_min_isr, "under-min-isr"),
           _count("Leader imbalance", view.leader_imbalance, "leader-imbalance"),
           _count("Reassignments", len(view.reassignments), "reassigning"), "</p>"]
    out.append("<h2>Brokers</h2>")
    rows = []
    for b in view.brokers:
        live = "yes" if b.live else '<span class="bad">no (offline)</span>'
        role = " (controller)" if b.id == view.controller else ""
        where = f"{b.host}:{b.port}" if b.host else "-"
        rows.append(f'<tr id="broker-{b.id}"><td class="n">{b.id}{role}</td><td>{_e(b.rack or "-")}'
                    f"</td><td>{_e(where)}</td><td>{live}</td><td class=n>{b.leaders}</td>"
                    f"<td class=n>{b.replicas}</td><td class=n>{b.not_led}/{b.preferred}</td>"
                    f"<td class=n>{human_bytes(b.bytes)}</td></tr>")
    out.append(_table(("Broker", "Rack", "Address", "Live", "Leaders", "Replicas",
                       "Misled/preferred", "Bytes"), rows, id_="brokers"))
    if options.actions and view.leader_imbalance:
        out.append(_action("/actions/elect-preferred", "Run preferred elections (all "
                                                       "partitions)", {}))
    out.append(f"<h2>Reassignments in progress ({len(view.reassignments)})</h2>")
    if view.reassignments:
        rows = []
        for m in view.reassignments[:MAX_ROWS]:
            rows.append(f"<tr><td>{_e(m.topic)}-{m.partition}</td><td>{_ids(m.replicas)}</td>"
                        f"<td>{_ids(m.target)}</td><td>{_ids(m.isr)}</td>"
                        f'<td><progress max="{len(m.target)}" value="{m.in_isr}"></progress> '
                        f"{m.in_isr}/{len(m.target)} in ISR"
                        f"{'' if m.started else ' (pending)'}</td></tr>")
        out.append(_table(("Partition", "Replicas", "Target", "ISR", "Progress"), rows,
                          id_="reassignments"))
        out.append(_more(len(view.reassignments), MAX_ROWS))
        if options.actions:
            out.append(_action("/actions/cancel-reassignment", "Cancel the reassignment", {}))
    else:
        out.append("<p>None.</p>")
    troubled = view.troubled
    out.append(f"<h2>Partitions in trouble ({len(troubled)})</h2>")
    if troubled:
        out.append(_partitions(troubled[:MAX_ROWS], id_="troubled"))
        out.append(_more(len(troubled), MAX_ROWS))
    else:
        out.append("<p>None: every partition has a leader and its full ISR.</p>")
    out.append("<h2>Topics</h2>")
    rows = [f'<tr><td><a href="/topic?name={quote(t.name)}">{_e(t.name)}</a>'
            f"{' (being deleted)' if t.deleting else ''}</td><td class=n>{t.partitions}</td>"
            f"<td class=n>{t.replication_factor}</td>"
            f"<td class=n>{_flag(t.under_replicated)}</td><td class=n>{_flag(t.offline)}</td>"
            f"<td class=n>{_flag(t.under_min_isr)}</td></tr>" for t in view.topics]
    out.append(_table(("Topic", "Partitions", "RF", "Under-replicated", "Offline",
                       "Under min ISR"), rows, id_="topics"))
    if state_changes is not None:
        out.append(f"<h2>Recent state changes ({len(state_changes)})</h2>")
        out.append('<pre id="state-changes">' + "\n".join(_e(x) for x in state_changes)
                   + "</pre>" if state_changes else "<p>None logged.</p>")
    if options.plots:
        out.append('<h2>Load per broker</h2><img src="/plot/current.png" '
                   'alt="replicas and preferred leaders per broker, grouped by rack">')
    return page("partctl cluster", "".join(out), options)


def _flag(n: int) -> str:
    return f'<span class="bad">{n}</span>' if n else "0"


def _partitions(parts: Sequence[PartitionView], *, id_: str) -> str:
    rows = []
    for p in parts:
        problems = [w for w, on in (("offline", p.offline), ("under-replicated",
                                    p.under_replicated), ("under min ISR", p.under_min_isr),
                                    ("leader not preferred", p.preferred_not_leader)) if on]
        leader = "none" if p.leader in (None, -1) else str(p.leader)
        bad = ' class="bad"' if p.offline or p.under_replicated or p.under_min_isr else ""
        rows.append(f'<tr id="p-{_e(p.topic)}-{p.partition}"><td>{_e(p.topic)}-{p.partition}'
                    f"</td><td>{leader}</td><td>{_ids(p.replicas)}</td><td>{_ids(p.isr)}</td>"
                    f"<td class=n>{p.min_isr}</td><td{bad}>{_e(', '.join(problems))}</td></tr>")
    return _table(("Partition", "Leader", "Replicas", "ISR", "Min ISR", "Problems"), rows,
                  id_=id_)


def topic_page(view: ClusterView, name: str, options: PageOptions) -> str | None:
    """A topic's partitions with leader and ISR; None when there is no such topic."""
    topic = next((t for t in view.topics if t.name == name), None)
    if topic is None:
        return None
    parts = [p for p in view.partitions if p.topic == name]
    body = (f"<p>{topic.partitions} partitions, replication factor {topic.replication_factor}"
            f"; {topic.under_replicated} under-replicated, {topic.offline} offline.</p>"
            + _partitions(parts[:MAX_TOPIC_ROWS], id_="partitions")
            + _more(len(parts), MAX_TOPIC_ROWS))
    if options.actions:
        body += _action("/actions/elect-preferred", "Run preferred elections for this topic",
                        {"topic": name})
    return page(f"Topic {name}", body, options)


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupLag:
    group: str
    state: str
    lag: int | None
    """Sum over its partitions of log end minus committed offset; None if unknown."""
    partitions: int


def groups_page(groups: Sequence[GroupLag] | None, error: str | None,
                options: PageOptions) -> str:
    if error is not None:
        body = f'<p class="note">Consumer groups are read from the brokers: {_e(error)}</p>'
    elif not groups:
        body = "<p>No consumer groups.</p>"
    else:
        rows = [f"<tr><td>{_e(g.group)}</td><td>{_e(g.state)}</td>"
                f"<td class=n>{g.partitions}</td><td class=n>"
                f"{'-' if g.lag is None else g.lag}</td></tr>" for g in groups]
        body = _table(("Group", "State", "Partitions", "Lag"), rows, id_="groups")
    return page("Consumer groups", body, options)


def plan_page(problems: Sequence[str] | None, options: PageOptions) -> str:
    if problems:
        body = ('<p class="bad">The plan does not apply to the cluster as it is:</p><ul>'
                + "".join(f"<li>{_e(p)}</li>" for p in problems[:MAX_ROWS]) + "</ul>")
    else:
        body = ('<img src="/plot/plan.png" alt="replicas, preferred leaders and bytes per broker '
                'before and after the plan">')
    return page("The plan, before and after", body, options)


def message_page(title: str, message: str, options: PageOptions) -> str:
    """The answer to an action or an error: never reloaded (a reload could post again)."""
    still = PageOptions(actions=options.actions, plan=options.plan, plots=options.plots)
    return page(title, f'<p id="message">{_e(message)}</p><p><a href="/">Back</a></p>', still)


def _action(path: str, label: str, fields: dict[str, str]) -> str:
    hidden = "".join(f'<input type="hidden" name="{_e(k)}" value="{_e(v)}">'
                     for k, v in fields.items())
    return (f'<form method="post" action="{_e(path)}">{hidden}'
            f'<button type="submit">{_e(label)}</button></form>')
