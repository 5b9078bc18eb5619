"""Pictures of a cluster's load: replicas, leaders and bytes per broker, grouped by rack, before
and after a plan (``reassign generate --plot``) or as it is (``cluster snapshot --plot``).

matplotlib is the ``plot`` extra, imported here only and only when a picture is asked for; it
draws on its Agg canvas (no display, no pyplot state). :func:`check_plot_target` runs before any
work, so a missing extra or an unwritable path costs nothing but one error line.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import IO, Any

from partctl.errors import UserError
from partctl.render import BrokerLoad

GIB = 2**30
BEFORE, AFTER = "#b0b7c3", "#2f6db5"


def _matplotlib() -> Any:
    from rebalancer.extras import import_extra

    return import_extra("matplotlib", extra="plot", feature="--plot")


def check_plot_target(path: str) -> None:
    """Refuse, before any work, a picture that cannot be written: matplotlib missing, a file
    type it cannot draw, a directory that is not there or not writable."""
    _matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    ext = os.path.splitext(path)[1].lstrip(".").lower()
    kinds = FigureCanvasAgg(Figure()).get_supported_filetypes()
    if ext and ext not in kinds:
        raise UserError(f"cannot write --plot {path}: unknown picture type .{ext} (known: "
                        f"{', '.join(sorted(kinds))})")
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UserError(f"cannot write --plot {path}: Is a directory")
    if not os.path.isdir(parent):
        raise UserError(f"cannot write --plot {path}: No such file or directory")
    if not os.access(parent, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise UserError(f"cannot write --plot {path}: Permission denied")


def _order(loads: Sequence[BrokerLoad]) -> list[BrokerLoad]:
    """Brokers by rack (brokers without one last), then by id."""
    return sorted(loads, key=lambda x: (x.rack is None, x.rack or "", x.broker))


def plot_loads(loads: Sequence[BrokerLoad], path: str | IO[bytes], *, title: str,
               compare: bool = True) -> int:
    """Draw ``loads`` to ``path`` and return the number of panels (axes) drawn: replicas,
    leaders and, when sizes are known, GiB per broker; before and after side by side when
    ``compare``, else the current state alone. Racks are marked along the x axis. ``path``
    may be a binary file object, which gets a PNG (the cluster page serves it)."""
    _matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    loads = _order(loads)
    sized = any(x.bytes is not None for x in loads)
    panels: list[tuple[str, list[float], list[float]]] = [
        ("Replicas", [x.replicas[0] for x in loads], [x.replicas[1] for x in loads]),
        ("Preferred leaders", [x.leaders[0] for x in loads], [x.leaders[1] for x in loads]),
    ]
    if sized:
        panels.append(("GiB", [(x.bytes or (0, 0))[0] / GIB for x in loads],
                       [(x.bytes or (0, 0))[1] / GIB for x in loads]))
    width = max(8.0, min(24.0, 0.12 * len(loads) + 4))
    fig = Figure(figsize=(width, 2.6 * len(panels) + 0.8), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    xs = list(range(len(loads)))
    bar = 0.42 if compare else 0.8
    active = [i for i, x in enumerate(loads) if not x.leaving]
    for ax, (label, before, after) in zip(axes, panels, strict=True):
        if compare:
            ax.bar([x - bar / 2 for x in xs], before, bar, color=BEFORE)
            ax.bar([x + bar / 2 for x in xs], after, bar, color=AFTER)
            shown = after
        else:
            ax.bar(xs, before, bar, color=AFTER)
            shown = before
        if active:
            mean = sum(shown[i] for i in active) / len(active)
            ax.axhline(mean, color="#d1495b", linewidth=1, linestyle="--", zorder=3)
        ax.set_ylabel(label)
        ax.grid(axis="y", alpha=0.3)
        _rack_bands(ax, loads)
    axes[-1].set_xticks(xs, [f"{x.broker}{'*' if x.leaving else ''}" for x in loads],
                        rotation=90 if len(loads) > 30 else 0,
                        fontsize=7 if len(loads) > 30 else 9)
    axes[-1].set_xlabel("Broker, grouped by rack (* leaving)")
    handles = ([Patch(color=BEFORE, label="before"), Patch(color=AFTER, label="after")]
               if compare else [Patch(color=AFTER, label="now")])
    handles.append(Patch(color="#d1495b", label="mean of the active brokers"))
    fig.legend(handles=handles, loc="outside lower center", fontsize=8, ncols=len(handles),
               frameon=False)
    fig.suptitle(title)
    try:
        fig.savefig(path)
    except OSError as exc:
        raise UserError(f"cannot write --plot {path}: {exc.strerror or exc}") from None
    return len(panels)


def _rack_bands(ax: Any, loads: Sequence[BrokerLoad]) -> None:
    """Shade every other rack and name each rack above its brokers."""
    start = 0
    band = 0
    for i in range(1, len(loads) + 1):
        if i < len(loads) and loads[i].rack == loads[start].rack:
            continue
        if band % 2:
            ax.axvspan(start - 0.5, i - 0.5, color="#000000", alpha=0.05, linewidth=0)
        ax.text((start + i - 1) / 2, 1.0, loads[start].rack or "no rack", ha="center",
                va="bottom", fontsize=8, transform=ax.get_xaxis_transform())
        start, band = i, band + 1
    ax.set_xlim(-0.6, len(loads) - 0.4)
