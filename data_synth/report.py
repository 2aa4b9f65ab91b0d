"""Run reports: Markdown with PNG plots, shared by the synthesis pipelines.

    report = Report("Environment synthesis", run_dir / "report")
    report.funnel(Funnel.from_run(run_dir, steps, first_inputs=n_seeds))
    report.bar("scenario_types", Counter(types), title="Scenario types")
    report.hist("hops", hops, title="Sub-questions per environment", xlabel="sub-questions", integer=True)
    report.hist("scores", {"kept": kept, "rejected": low}, title="Scores", xlabel="score", stacked=True)
    report.rejections(funnel)          # every step's rejection reasons, one chart
    path = report.write()              # report/report.md (+ one PNG per plot)

Plots are written as they are added (matplotlib, Agg backend: no display needed), into
`out_dir`, or into `out_dir/<plot_dir>` when given. An empty series gives a line of text
instead of an empty plot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from data_synth.pipeline.funnel import Funnel


def _plt():
    """matplotlib's pyplot on the Agg backend, imported at the first plot: importing it costs about a
    second, which every pipeline's `--help` would otherwise pay (this module is imported by their CLIs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# several series in one plot: the funnel's ok / rejected colours first, then neutral ones
SERIES_COLORS = ("#55a868", "#dd8452", "#4c72b0", "#8172b3", "#937860")


class Report:
    def __init__(self, title: str, out_dir: str | Path, *, plot_dir: str = ""):
        self.title = title
        self.out_dir = Path(out_dir)
        self.plot_dir = plot_dir
        (self.out_dir / plot_dir).mkdir(parents=True, exist_ok=True)
        self._parts: list[str] = [f"# {title}\n"]

    # -- building blocks ------------------------------------------------------------------
    def text(self, markdown: str) -> None:
        self._parts.append(markdown.rstrip() + "\n")

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
        self._parts.append("\n".join(lines) + "\n")

    def _save(self, fig, name: str, title: str) -> None:
        fig.tight_layout()
        # bbox "tight": the image grows to hold a legend placed beside the axes (`_legend`)
        fig.savefig(self.out_dir / self.plot_dir / f"{name}.png", dpi=110, bbox_inches="tight")
        _plt().close(fig)
        self._parts.append(f"![{title}]({PurePosixPath(self.plot_dir, f'{name}.png')})\n")

    def bar(
        self,
        name: str,
        counts: Mapping[str, int | float],
        *,
        title: str,
        xlabel: str = "",
        top: int = 25,
        sort: bool = True,
        xlim: tuple[float, float] | None = None,
    ) -> None:
        """Horizontal bars, largest first (`sort=False`: in the mapping's order)."""
        self._parts.append(f"## {title}\n")
        items = list(counts.items())
        if sort:
            items.sort(key=lambda kv: (-kv[1], str(kv[0])))
        items = items[:top]
        if not items:
            self._parts.append("_nothing to show_\n")
            return
        labels = [str(k) for k, _ in items][::-1]
        values = [v for _, v in items][::-1]
        fig, ax = _plt().subplots(figsize=(8, max(2.0, 0.35 * len(items) + 1)))
        ax.barh(labels, values, color="#4c72b0")
        for y, v in enumerate(values):
            ax.text(v, y, f" {v:g}", va="center", fontsize=8)
        if xlim is not None:
            ax.set_xlim(*xlim)
        ax.set_xlabel(xlabel)
        ax.set_title(title)
        self._save(fig, name, title)

    def hist(
        self,
        name: str,
        values: Sequence[float] | Mapping[str, Sequence[float]],
        *,
        title: str,
        xlabel: str,
        bins: int = 20,
        span: tuple[float, float] | None = None,
        integer: bool = False,
        stacked: bool = False,
        colors: Sequence[str] = SERIES_COLORS,
        vline: float | None = None,
        vline_label: str = "",
    ) -> None:
        """A histogram of one series, or of several named ones (`{label: values}`): bars side
        by side, or on top of each other with `stacked`. `span`: the range the bins cover
        (default: the data's); `integer`: one bin per whole number; `colors`: one per series."""
        self._parts.append(f"## {title}\n")
        series = {k: list(v) for k, v in values.items()} if isinstance(values, Mapping) else {"": list(values)}
        every = [v for vs in series.values() for v in vs]
        if not every:
            self._parts.append("_nothing to show_\n")
            return
        fig, ax = _plt().subplots(figsize=(7, 3.5))
        edges: int | list[float] = bins
        if integer:
            lo, hi = int(min(every)), int(max(every))
            edges = [x - 0.5 for x in range(lo, hi + 2)]
            ax.set_xticks(range(lo, hi + 1))
        several = len(series) > 1
        ax.hist(
            list(series.values()) if several else every,
            bins=edges,
            range=span,
            stacked=stacked,
            color=list(colors[: len(series)]),
            label=list(series) if several else None,
            rwidth=0.85 if integer else None,
        )
        if vline is not None:
            ax.axvline(vline, color="#c44e52", linestyle="--", label=vline_label or f"{vline:g}")
        if several or vline is not None:
            _legend(ax)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("count")
        ax.set_title(title)
        self._save(fig, name, title)
        self._parts.append("; ".join(f"{k + ': ' if k else ''}{_summary(vs)}" for k, vs in series.items()) + "\n")

    # -- funnels --------------------------------------------------------------------------
    def funnel(self, funnel: Funnel, *, name: str = "funnel") -> None:
        self._parts.append("## Funnel\n")
        rows = []
        for c in funnel.steps:
            rows.append(
                [
                    c.step,
                    "" if c.inputs is None else c.inputs,
                    c.ok,
                    c.rejected,
                    c.error,
                    "" if c.pending is None else c.pending,
                    c.outputs,
                    c.usage.completions,
                    c.usage.prompt_tokens + c.usage.completion_tokens,
                ]
            )
        self.table(["step", "in", "ok", "rejected", "error", "pending", "out", "LLM calls", "tokens"], rows)
        if not funnel.steps:
            return
        fig, ax = _plt().subplots(figsize=(8, 0.45 * len(funnel.steps) + 1.2))
        labels = [c.step for c in funnel.steps][::-1]
        ok = [c.ok for c in funnel.steps][::-1]
        rej = [c.rejected for c in funnel.steps][::-1]
        err = [c.error for c in funnel.steps][::-1]
        ax.barh(labels, ok, color="#55a868", label="ok")
        ax.barh(labels, rej, left=ok, color="#dd8452", label="rejected")
        ax.barh(labels, err, left=[a + b for a, b in zip(ok, rej, strict=True)], color="#c44e52", label="error")
        ax.set_xlabel("records")
        _legend(ax)
        ax.set_title("Funnel")
        self._save(fig, name, "Funnel")

    def rejections(self, funnel: Funnel, *, name: str = "rejections", top: int = 30) -> None:
        counts: dict[str, int] = {}
        for c in funnel.steps:
            for reason, n in {**c.rejection_reasons, **{f"ERROR {k}": v for k, v in c.error_reasons.items()}}.items():
                counts[f"{c.step}: {reason}"] = n
        self.bar(name, counts, title="Rejection and error reasons", xlabel="records", top=top)

    def write(self, name: str = "report.md") -> Path:
        path = self.out_dir / name
        path.write_text("\n".join(self._parts), encoding="utf-8")
        return path


def _legend(ax) -> None:
    """The legend beside the axes, never over bars (a full bar or a tall bin hid it inside)."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False)


def _summary(values: Sequence[float]) -> str:
    if not values:
        return "n = 0"
    mean = sum(values) / len(values)
    return f"n = {len(values)}, mean = {mean:.3g}, min = {min(values):g}, max = {max(values):g}"
