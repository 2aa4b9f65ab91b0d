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
