"""The report plots read right: legends beside the axes (never over bars), scores in [0, 1] on a
[0, 1] axis even when every score is the same, the judge's threshold drawn on its histogram."""

from __future__ import annotations

import pytest

import data_synth.report as report_mod
from data_synth.env.report import write_env_report
from data_synth.pipeline import Appender, Envelope, Funnel, step_file
from data_synth.report import Report
from data_synth.traj.report import write_report


@pytest.fixture
def figures(monkeypatch):
    """Every figure a report draws, by title, kept open for inspection."""
    drawn = {}
    plt = report_mod._plt()  # pyplot is imported at the first plot (a fast --help)
    monkeypatch.setattr(plt, "close", lambda fig: drawn.setdefault(fig.axes[0].get_title(), fig))
    yield drawn
    monkeypatch.undo()
    for fig in drawn.values():
        plt.close(fig)


def _funnel(tmp_path) -> Funnel:
    with Appender(step_file(tmp_path, "a")) as out:
        for i in range(40):
            out.append(Envelope(step="a", key=f"k{i}", status="ok", out=[{"key": f"k{i}"}]))
        out.append(Envelope(step="a", key="r", status="rejected", reason="short"))
    return Funnel.from_run(tmp_path, ["a"], first_inputs=41)


def test_legends_sit_beside_the_axes(tmp_path, figures):
    report = Report("r", tmp_path / "report")
    report.funnel(_funnel(tmp_path))  # a full bar reaches the right edge, where the legend used to be
    report.hist("scores", {"kept": [0.9] * 30, "low": [0.1] * 30}, title="Scores", xlabel="s", span=(0, 1))
    report.hist("q", [0.5, 0.9], title="Quality", xlabel="q", vline=0.7)
    assert set(figures) == {"Funnel", "Scores", "Quality"}
    for title, fig in figures.items():
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        legend, axes = ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer)
        assert legend.x0 >= axes.x1, f"{title}: the legend overlaps the plot"
    # the threshold is drawn where it is, as a full-height vertical line named in the legend
    (line,) = figures["Quality"].axes[0].get_lines()
    assert list(line.get_xdata()) == [0.7, 0.7] and list(line.get_ydata()) == [0, 1]
    assert line.get_label() in [t.get_text() for t in figures["Quality"].axes[0].get_legend().get_texts()]


def test_one_repeated_score_keeps_the_unit_axis(tmp_path, figures):
    Report("r", tmp_path).hist("q", [1.0, 1.0, 1.0], title="Quality", xlabel="q", span=(0, 1))
    lo, hi = figures["Quality"].axes[0].get_xlim()
    assert -0.1 <= lo <= 0 and 1 <= hi <= 1.1  # not 0.5..1.5


def test_the_pipeline_reports_pass_the_score_range_and_the_threshold(tmp_path, monkeypatch):
    calls = {}
    real = Report.hist

    def spy(self, name, values, **kw):
        calls[name] = kw
        return real(self, name, values, **kw)

    monkeypatch.setattr(Report, "hist", spy)
    (tmp_path / "env").mkdir()
    write_env_report(tmp_path / "env")
    assert calls["quality"]["span"] == (0, 1)
    write_report(tmp_path / "traj", Funnel(steps=[]), [], threshold=0.65)
    assert calls["judge_scores"]["span"] == (0, 1) and calls["judge_scores"]["vline"] == 0.65
