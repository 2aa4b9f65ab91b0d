"""BFCL's `evaluate_task` run directly on scripted single-turn results: the reference our path is checked against.

Run as a script (`python bfcl_single_direct.py CASES.json OUT.json`), in its own process:
`eval_runner` imports every provider SDK BFCL has a handler for; each one that is not installed
is replaced by an inert stand-in in this process only (tests/eval/bfcl_direct.py), while
numpy, pandas, filelock, tqdm and tree-sitter are the real, installed ones. The results are the
tests' own scripts (ground truth and fixed perturbations), never model output.

For each case {name, style, category, id, result}: `evaluate_task(category, ..., model_result=
[{"id", "result"}], model_name, handler, allow_missing=True)`, exactly what `bfcl evaluate
--partial-eval` runs per category (it loads BFCL's prompts and answers itself), with BFCL's
OpenAI chat-completions handler in FC or prompting mode and a registered model name of that
mode; the verdict is its accuracy (1 or 0) and the error type from the score file it writes.

`aggregates` in the case file: per-category {accuracy, total_count}; BFCL's
`generate_leaderboard_csv` turns them into its leaderboard files, whose single-turn columns are
returned.
"""

from __future__ import annotations

import csv
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bfcl_direct import _InertFinder, _install_stand_ins  # noqa: E402

OPTIONAL = (
    "anthropic", "boto3", "cohere", "datamodel_code_generator", "dotenv", "google", "mistralai", "openai",
    "overrides", "qwen_agent", "writerai", "tenacity", "tree_sitter", "tree_sitter_java", "tree_sitter_javascript",
)  # fmt: skip
NAMESPACED = ("google.genai",)  # `google` may be an installed namespace package without genai


class _PrefixFinder(_InertFinder):
    def find_spec(self, name, path, target=None):
        if any(name == p or name.startswith(p + ".") for p in self.roots):
            return _spec(self, name)
        return None


def _spec(loader, name):
    import importlib.machinery

    return importlib.machinery.ModuleSpec(name, loader, is_package=True)


MODELS = {"fc": "gpt-4o-2024-11-20-FC", "prompting": "gpt-4o-2024-11-20"}


def _verdict(eval_runner, handler_class, case: dict, score_dir: Path) -> dict:
    from bfcl_eval.utils import get_directory_structure_by_category

    handler = handler_class.__new__(handler_class)
    handler.is_fc_model = case["style"] == "fc"
    model = MODELS[case["style"]]
    table: dict = {}
    eval_runner.evaluate_task(
        case["category"], None, score_dir, [{"id": case["id"], "result": case["result"]}], model, handler, table, True
    )
    accuracy = table[model][case["category"]]["accuracy"]
    score_file = score_dir / model / get_directory_structure_by_category(case["category"])
    rows = [
        json.loads(line) for line in next(score_file.glob(f"*_{case['category']}_score.json")).read_text().splitlines()
    ]
    failed = rows[1:]
    return {"name": case["name"], "valid": accuracy == 1.0, "error_type": failed[0]["error_type"] if failed else None}


def _aggregates(helper, per_category: dict, out_dir: Path) -> dict:
    model = MODELS["fc"]
    out_dir.mkdir(parents=True, exist_ok=True)
    helper.generate_leaderboard_csv({model: dict(per_category)}, out_dir)
    found = {}
    for path in out_dir.glob("*.csv"):
        with path.open() as f:
            rows = list(csv.reader(f))
        found[path.name] = dict(zip(rows[0], rows[1], strict=True))
    return found


def main(cases_path: str, out_path: str) -> None:
    os.environ.setdefault("BFCL_PROJECT_ROOT", tempfile.mkdtemp(prefix="bfcl_direct_"))
    _install_stand_ins(OPTIONAL)
    sys.meta_path.append(_PrefixFinder(set(NAMESPACED)))
    from bfcl_eval.eval_checker import eval_runner, eval_runner_helper
    from bfcl_eval.model_handler.api_inference.openai_completion import OpenAICompletionsHandler

    spec = json.loads(Path(cases_path).read_text())
    work = Path(tempfile.mkdtemp(prefix="bfcl_direct_scores_"))
    verdicts = [
        _verdict(eval_runner, OpenAICompletionsHandler, case, work / str(i)) for i, case in enumerate(spec["cases"])
    ]
    aggregates = (
        _aggregates(eval_runner_helper, spec["aggregates"], work / "leaderboard") if spec.get("aggregates") else {}
    )
    Path(out_path).write_text(json.dumps({"verdicts": verdicts, "aggregates": aggregates}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
