"""``partctl cluster status`` as one rich screen: a :class:`~partctl.cluster_view.ClusterView`
drawn as the health counts, the brokers, the reassignments in progress with a progress bar each,
and the first partitions in trouble. Pure: a view in, a renderable out (the command prints it
once, or redraws it under ``rich.live.Live`` with ``--watch``)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from partctl.cluster_view import ClusterView, PartitionView
from partctl.render import human_bytes
from partctl.render import id_list_text as _ids

MAX_ROWS = 20
"""Reassignments and troubled partitions shown; the rest are counted."""


def _count(label: str, n: int) -> Text:
    return Text(f"{label} {n}", style="bold red" if n else "green")


def status_screen(view: ClusterView, *, note: str | None = None) -> RenderableType:
    """The screen for ``view``; ``note`` a line under the title (e.g. a failed refresh)."""
    live = len(view.live_brokers)
    controller = ("none" if view.controller is None
                  else f"broker {view.controller} (epoch {view.controller_epoch})")
    title = Text.assemble(
        ("partctl cluster status", "bold"),
        f"  {view.taken_at:%Y-%m-%d %H:%M:%S} UTC\n",
        f"Controller {controller}; brokers {live} live of {len(view.brokers)}; "
        f"{len(view.topics)} topics, {len(view.partitions)} partitions")
    parts: list[RenderableType] = [title]
    if note:
        parts.append(Text(note, style="yellow"))
    parts.append(Text("  ").join([
        _count("Offline partitions", view.offline),
        _count("Under-replicated", view.under_replicated),
        _count("Under min ISR", view.under_min_isr),
        _count("Leader imbalance", view.leader_imbalance),
        _count("Reassigning", len(view.reassignments)),
    ]))
    parts.append(_brokers(view))
    if view.reassignments:
        parts.append(_reassignments(view))
    troubled = view.troubled
    if troubled:
        parts.append(_troubled(troubled))
    return Group(*parts)


def _brokers(view: ClusterView) -> Table:
    table = Table(title="Brokers", title_justify="left", expand=False)
    for name in ("Broker", "Rack", "Live", "Leaders", "Replicas", "Misled", "Bytes"):
        # Misled: of the partitions it is the preferred replica of, those it does not lead
        table.add_column(name, justify="left" if name in ("Rack", "Live") else "right")
    for b in view.brokers:
        mark = ("controller " if b.id == view.controller else "")
        table.add_row(str(b.id), b.rack or "-",
                      Text(mark + ("yes" if b.live else "NO"), style="" if b.live else "bold red"),
                      str(b.leaders), str(b.replicas),
                      f"{b.not_led}/{b.preferred}" + (" !" if b.id in view.imbalanced_brokers
                                                      else ""),
                      human_bytes(b.bytes))
    return table


def _reassignments(view: ClusterView) -> Table:
    table = Table(title=f"Reassignments in progress ({len(view.reassignments)})",
                  title_justify="left")
    for name in ("Partition", "Replicas", "Target", "ISR", "Target in ISR", "Progress"):
        table.add_column(name)
    for m in view.reassignments[:MAX_ROWS]:
        table.add_row(f"{m.topic}-{m.partition}", _ids(m.replicas), _ids(m.target), _ids(m.isr),
                      f"{m.in_isr}/{len(m.target)}" + ("" if m.started else " (pending)"),
                      ProgressBar(total=len(m.target) or 1, completed=m.in_isr, width=20))
    rest = len(view.reassignments) - MAX_ROWS
    if rest > 0:
        table.caption = f"and {rest} more"
    return table


def _troubled(troubled: tuple[PartitionView, ...]) -> Table:
    table = Table(title=f"Partitions in trouble ({len(troubled)})", title_justify="left")
    for name in ("Partition", "Leader", "Replicas", "ISR", "Min ISR", "Problem"):
        table.add_column(name)
    for p in troubled[:MAX_ROWS]:
        problems = [w for w, on in (("offline", p.offline), ("under-replicated",
                                    p.under_replicated), ("under min ISR", p.under_min_isr))
                    if on]
        table.add_row(f"{p.topic}-{p.partition}", "none" if p.leader in (None, -1)
                      else str(p.leader), _ids(p.replicas), _ids(p.isr), str(p.min_isr),
                      Text(", ".join(problems), style="red"))
    rest = len(troubled) - MAX_ROWS
    if rest > 0:
        table.caption = f"and {rest} more"
    return table
