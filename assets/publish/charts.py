"""Pictures drawn at build time as plain SVG (no script, no web font): they render in any
browser without JavaScript and cost microseconds, where a chart library would cost
seconds per thousand pages."""

import datetime as dt
import math
from html import escape

# Colours with at least 4.5:1 contrast against white for text, 3:1 for shapes.
PALETTE = ("#1f5fa8", "#b3471d", "#2a7a3b", "#6b3fa0", "#8a6d00", "#0f6f73")
INK, GRID, LIMIT = "#1a1a1a", "#c8c8c8", "#b00020"


def memory_bar(parts: list[tuple[str, float]], usable: float, capacity: float, title: str) -> str:
    """A horizontal bar of the memory parts (GiB) against the GPU's usable memory."""
    width, left, bar_h = 640, 10, 34
    scale = (width - 2 * left) / max(capacity, usable, sum(v for _, v in parts), 1e-9)
    x: float = left
    rects, legend = [], []
    for i, (label, value) in enumerate(parts):
        w = max(value, 0) * scale
        colour = PALETTE[i % len(PALETTE)]
        rects.append(
            f'<rect x="{x:.1f}" y="10" width="{w:.1f}" height="{bar_h}" '
            f'fill="{colour}"><title>{escape(label)}: {value:.2f} GiB</title></rect>'
        )
        legend.append(
            f'<rect x="{left + 160 * (i % 4)}" y="{64 + 18 * (i // 4)}" width="12" '
            f'height="12" fill="{colour}"/><text x="{left + 160 * (i % 4) + 16}" '
            f'y="{74 + 18 * (i // 4)}">{escape(label)} {value:.2f} GiB</text>'
        )
        x += w
    ux = left + usable * scale
    rows = math.ceil(len(parts) / 4)
    height = 70 + 18 * rows + 10
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{escape(title)}" class="chart">'
        f"<title>{escape(title)}</title>"
        f'<rect x="{left}" y="10" width="{width - 2 * left}" height="{bar_h}" '
        f'fill="#f2f2f2" stroke="{GRID}"/>{"".join(rects)}'
        f'<line x1="{ux:.1f}" x2="{ux:.1f}" y1="4" y2="{16 + bar_h}" stroke="{LIMIT}" '
        f'stroke-width="3"/><text x="{min(ux, width - 150):.1f}" y="{height - 4}" '
        f'fill="{LIMIT}" font-size="12">usable {usable:.2f} GiB</text>'
        f'<g font-size="12" fill="{INK}">{"".join(legend)}</g></svg>'
    )


def line_chart(
    series: dict[str, list[tuple[int, float]]],
    limit: float | None,
    title: str,
    y_label: str,
    x_label: str = "context (tokens)",
) -> str:
    """Lines over a log2 x axis (contexts double), with an optional horizontal limit."""
    points = [p for s in series.values() for p in s]
    if not points:
        return ""
    width, height, ml, mr, mt, mb = 640, 300, 60, 130, 20, 45
    xs = sorted({x for x, _ in points})
    lo, hi = math.log2(xs[0]), math.log2(xs[-1])
    top = max([y for _, y in points] + ([limit] if limit else [])) * 1.08 or 1

    def px(x: int) -> float:
        return ml + (0.5 if hi == lo else (math.log2(x) - lo) / (hi - lo)) * (width - ml - mr)

    def py(y: float) -> float:
        return mt + (1 - y / top) * (height - mt - mb)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{escape(title)}" class="chart"><title>{escape(title)}'
        f'</title><g font-size="12" fill="{INK}">'
    ]
    for i in range(5):
        y = top * i / 4
        out.append(
            f'<line x1="{ml}" x2="{width - mr}" y1="{py(y):.1f}" y2="{py(y):.1f}" '
            f'stroke="{GRID}"/><text x="{ml - 6}" y="{py(y) + 4:.1f}" '
            f'text-anchor="end">{y:.0f}</text>'
        )
    for x in xs:
        label = f"{x // 1024}K" if x % 1024 == 0 else str(x)
        out.append(
            f'<text x="{px(x):.1f}" y="{height - mb + 16}" text-anchor="middle">{label}</text>'
        )
    out.append(
        f'<text x="{(ml + width - mr) / 2}" y="{height - 6}" text-anchor="middle">'
        f'{escape(x_label)}</text><text x="14" y="{mt + 6}" '
        f'transform="rotate(-90 14 {mt + 6})" text-anchor="end">{escape(y_label)}</text>'
    )
    if limit:
        out.append(
            f'<line x1="{ml}" x2="{width - mr}" y1="{py(limit):.1f}" '
            f'y2="{py(limit):.1f}" stroke="{LIMIT}" stroke-width="2" '
            f'stroke-dasharray="6 4"/><text x="{width - mr + 6}" '
            f'y="{py(limit) + 4:.1f}" fill="{LIMIT}">usable {limit:.1f}</text>'
        )
    for i, (name, pts) in enumerate(series.items()):
        colour = PALETTE[i % len(PALETTE)]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in sorted(pts))
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2.5"/>')
        out += [
            f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{colour}">'
            f"<title>{escape(name)}: {y:.2f} at {x:,}</title></circle>"
            for x, y in pts
        ]
        out.append(
            f'<rect x="{width - mr + 6}" y="{mt + 18 * i + 20}" width="12" '
            f'height="12" fill="{colour}"/><text x="{width - mr + 22}" '
            f'y="{mt + 18 * i + 30}">{escape(name)}</text>'
        )
    out.append("</g></svg>")
    return "".join(out)


def bar_chart(bars: list[tuple[str, float]], title: str, unit: str) -> str:
    """Horizontal bars, one per label (e.g. decode tok/s per weight format)."""
    bars = [(label, v) for label, v in bars if v is not None]
    if not bars:
        return ""
    width, ml, row = 640, 110, 20
    height = row * len(bars) + 10
    top = max(v for _, v in bars) or 1
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{escape(title)}" class="chart"><title>{escape(title)}'
        f'</title><g font-size="12" fill="{INK}">'
    ]
    for i, (label, v) in enumerate(bars):
        w = v / top * (width - ml - 90)
        y = 5 + i * row
        out.append(
            f'<text x="{ml - 6}" y="{y + 13}" text-anchor="end">{escape(label)}</text>'
            f'<rect x="{ml}" y="{y + 2}" width="{w:.1f}" height="{row - 6}" '
            f'fill="{PALETTE[0]}"/><text x="{ml + w + 4:.1f}" y="{y + 13}">'
            f"{v:,.1f} {escape(unit)}</text>"
        )
    out.append("</g></svg>")
    return "".join(out)


def dated_chart(rows: list[dict], title: str, y_label: str) -> str:
    """Price over the recorded dates (dates or ISO strings, as the site's rows carry them),
    one line per provider (x: days, y: from zero)."""
    if not rows:
        return ""
    series: dict[str, list[tuple[dt.date, float]]] = {}
    for r in rows:
        day = dt.date.fromisoformat(str(r["verified_at"]))
        series.setdefault(r["provider"], []).append((day, r["price_per_gpu_hour_usd"]))
    width, height, ml, mr, mt, mb = 640, 240, 60, 130, 20, 45
    days = sorted({d for pts in series.values() for d, _ in pts})
    span = (days[-1] - days[0]).days or 1
    top = max(y for pts in series.values() for _, y in pts) * 1.15 or 1

    def px(d: dt.date) -> float:
        return ml + (0.5 if len(days) == 1 else (d - days[0]).days / span) * (width - ml - mr)

    def py(y: float) -> float:
        return mt + (1 - y / top) * (height - mt - mb)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{escape(title)}" class="chart"><title>{escape(title)}'
        f'</title><g font-size="12" fill="{INK}">'
    ]
    for i in range(5):
        y = top * i / 4
        out.append(
            f'<line x1="{ml}" x2="{width - mr}" y1="{py(y):.1f}" y2="{py(y):.1f}" '
            f'stroke="{GRID}"/><text x="{ml - 6}" y="{py(y) + 4:.1f}" '
            f'text-anchor="end">{y:.2f}</text>'
        )
    for d in (days[0], days[-1]) if len(days) > 1 else days:
        out.append(
            f'<text x="{px(d):.1f}" y="{height - mb + 16}" text-anchor="middle">'
            f"{d.isoformat()}</text>"
        )
    out.append(
        f'<text x="14" y="{mt + 6}" transform="rotate(-90 14 {mt + 6})" '
        f'text-anchor="end">{escape(y_label)}</text>'
    )
    for i, (name, pts) in enumerate(sorted(series.items())):
        colour = PALETTE[i % len(PALETTE)]
        path = " ".join(f"{px(d):.1f},{py(y):.1f}" for d, y in sorted(pts))
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2.5"/>')
        out += [
            f'<circle cx="{px(d):.1f}" cy="{py(y):.1f}" r="3.5" fill="{colour}">'
            f"<title>{escape(name)}: {y:.2f} on {d.isoformat()}</title></circle>"
            for d, y in pts
        ]
        out.append(
            f'<rect x="{width - mr + 6}" y="{mt + 18 * i + 20}" width="12" '
            f'height="12" fill="{colour}"/><text x="{width - mr + 22}" '
            f'y="{mt + 18 * i + 30}">{escape(name)}</text>'
        )
    out.append("</g></svg>")
    return "".join(out)
