"""The generic run report: Markdown + PNG plots from a funnel and series."""

from collections import Counter

from data_synth.pipeline import Appender, Envelope, Funnel, step_file
from data_synth.report import Report


def test_report_writes_markdown_and_plots(tmp_path):
    with Appender(step_file(tmp_path, "a")) as out:
        for i in range(5):
            out.append(Envelope(step="a", key=f"k{i}", status="ok", out=[{"key": f"k{i}"}]))
        out.append(Envelope(step="a", key="bad", status="rejected", reason="too_short"))
        out.append(Envelope(step="a", key="err", status="error", reason="llm_unavailable"))
    funnel = Funnel.from_run(tmp_path, ["a", "b"], first_inputs=8)
    assert funnel.steps[0].pending == 1 and funnel.steps[1].inputs == 5 and funnel.steps[1].pending == 5

    report = Report("Test run", tmp_path / "report")
    report.funnel(funnel)
    report.rejections(funnel)
    report.bar("types", Counter({"x": 3, "y": 1}), title="Types")
    report.hist("hops", [1, 2, 2, 3], title="Hops", xlabel="hops", integer=True)
    report.hist("quality", [0.5, 0.9, 1.0], title="Quality", xlabel="q", vline=0.9)
    report.hist("empty", [], title="Nothing", xlabel="-")
    path = report.write()
    text = path.read_text()
    for png in ("funnel", "rejections", "types", "hops", "quality"):
        assert (tmp_path / "report" / f"{png}.png").stat().st_size > 1000
        assert f"({png}.png)" in text
    assert "## Rejection and error reasons" in text
    assert "| a | 8 | 5 | 1 | 1 | 1 | 5 |" in text and "_nothing to show_" in text
    assert not (tmp_path / "report" / "empty.png").exists()


def test_named_series_given_order_and_a_plot_folder(tmp_path):
    report = Report("Series", tmp_path, plot_dir="plots")
    report.hist("scores", {"kept": [0.8, 0.9], "low": [0.2]}, title="Scores", xlabel="s", span=(0, 1), stacked=True)
    report.hist("lengths", {"sampled": [2, 3, 3], "verified": [2]}, title="Lengths", xlabel="n", integer=True)
    report.hist("none", {"a": [], "b": []}, title="None", xlabel="-")
    report.bar("dims", {"z": 0.2, "a": 0.9}, title="Dims", sort=False, xlim=(0, 1))
    text = report.write().read_text()
    assert (tmp_path / "report.md").is_file()
    for png in ("scores", "lengths", "dims"):
        assert (tmp_path / "plots" / f"{png}.png").stat().st_size > 1000 and f"(plots/{png}.png)" in text
    assert "kept: n = 2, mean = 0.85, min = 0.8, max = 0.9; low: n = 1, mean = 0.2, min = 0.2, max = 0.2" in text
    assert "sampled: n = 3" in text and "verified: n = 1" in text
    assert not (tmp_path / "plots" / "none.png").exists() and "## None\n\n_nothing to show_" in text
