"""BFCL run directly on scripted model responses: the reference our BFCL adapter is checked against.

Run as a script (`python bfcl_direct.py CASES.json`), in its own process, because:
- BFCL's handler modules import SDKs and parsers that `bfcl_eval` (installed without its
  dependencies) does not bring: tree_sitter (Java/JS parsers), openai, overrides, tenacity.
  None of them is used by the two decoders needed here, so each one that is not installed is
  replaced by an inert stand-in module in this process only;
- BFCL's checker executes the calls in this process (`eval`); the calls are the tests' own
  scripts (ground truth and fixed perturbations), never model output.

For each case: the step responses in the handler's own format (PROMPT: the generated text, split by
the handler's `_parse_query_response_prompting` as its inference loop records it,
with `<tool_call>` blocks, decoded by BFCL's `QwenFCHandler`; FC: `[{name: arguments string}]`,
or the content string when the reply has no calls, decoded by BFCL's OpenAI handler). The
responses are consumed in order by BFCL's inference rule for a turn (base_handler
`inference_multi_turn_*`: a step whose decoding raises or is empty ends the turn), and the
per-turn results go through BFCL's own `_evaluate_single_multi_turn_entry` (its source, taken
from eval_runner.py, which cannot be imported without every provider SDK), i.e. BFCL's
decoding of each step and `multi_turn_checker`. Prints one JSON verdict per case.

`python bfcl_direct.py --decode STEPS.json` prints, per step, only what BFCL's handler decodes
(`decode_step`). `bfcl_in_process()` gives the same decoders to a test's own process (the
stand-ins are removed again afterwards).
"""

from __future__ import annotations

import ast
import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import sys
import types
from pathlib import Path
from types import SimpleNamespace

OPTIONAL = ("tree_sitter", "tree_sitter_java", "tree_sitter_javascript", "openai", "overrides", "tenacity")


class _Inert:
    """Stands in for anything of a missing optional module: callable, subscriptable by attribute,
    usable as a decorator (returns the function) and in `a | b` (tenacity's retry conditions)."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]
        return _Inert()

    def __getattr__(self, name):
        return _Inert()

    def __mro_entries__(self, bases):
        return (object,)

    def __or__(self, other):
        return self

    __ror__ = __or__


def _inert_attribute(attr: str):
    if attr.startswith("__"):  # module metadata (`__file__` ...): absent, as tools that scan modules expect
        raise AttributeError(attr)
    return _Inert()


class _InertFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots: set[str]):
        self.roots = roots

    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = _inert_attribute
        return module

    def exec_module(self, module):
        pass


def _install_stand_ins(names: tuple[str, ...] = OPTIONAL) -> _InertFinder | None:
    missing = {name for name in names if importlib.util.find_spec(name) is None}
    if not missing:
        return None
    finder = _InertFinder(missing)
    sys.meta_path.append(finder)
    return finder


@contextlib.contextmanager
def bfcl_in_process():
    """BFCL's two handlers in this process; every module imported meanwhile (stand-ins and the
    handler modules built on them) is forgotten on exit, so nothing else sees the stand-ins."""
    before = set(sys.modules)
    finder = _install_stand_ins()
    try:
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import is_empty_execute_response

        yield _handlers(), is_empty_execute_response
    finally:
        if finder is not None:
            sys.meta_path.remove(finder)
        for name in set(sys.modules) - before:
            del sys.modules[name]


def recorded(handler, style: str, response):
    """What BFCL's inference loop records as a step's response (and later decodes): PROMPT, the
    handler's `_parse_query_response_prompting` of the generated text (reasoning removed); FC,
    the reply as given."""
    if style != "prompt":
        return response
    reply = SimpleNamespace(
        choices=[SimpleNamespace(text=response)], usage=SimpleNamespace(prompt_tokens=0, completion_tokens=0)
    )
    return handler._parse_query_response_prompting(reply)["model_responses"]


def decode_step(handlers: dict, is_empty, style: str, response) -> list[str] | None:
    """BFCL's decoding of one step: its call strings, or None where BFCL's inference loop ends the
    turn (decoding raises or is empty). PROMPT: the raw generated text, split by the handler's own
    `_parse_query_response_prompting` (reasoning removed) before `decode_execute`, as its loop does.
    FC: `[{name: arguments string}]` (or the content string), as BFCL's OpenAI handler records it."""
    handler = handlers[style]
    response = recorded(handler, style, response)
    try:
        calls = handler.decode_execute(response, has_tool_call_tag=False)
    except Exception:  # noqa: BLE001 - BFCL: "Failed to decode the model response. Proceed to next turn."
        return None
    return None if is_empty(calls) else calls


def _evaluator():
    """BFCL's `_evaluate_single_multi_turn_entry`, compiled from its own source."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    spec = importlib.util.find_spec("bfcl_eval.eval_checker.eval_runner")
    tree = ast.parse(Path(spec.origin).read_text())
    (node,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_evaluate_single_multi_turn_entry"]
    node.args.args[0].annotation = None  # BaseHandler
    namespace = {
        "multi_turn_checker": multi_turn_checker,
        "is_empty_execute_response": multi_turn_utils.is_empty_execute_response,
    }
    exec(compile(ast.Module(body=[node], type_ignores=[]), spec.origin, "exec"), namespace)
    return namespace["_evaluate_single_multi_turn_entry"], multi_turn_utils.is_empty_execute_response


def _handlers() -> dict:
    from bfcl_eval.model_handler.api_inference.openai_completion import OpenAICompletionsHandler
    from bfcl_eval.model_handler.local_inference.qwen_fc import QwenFCHandler

    qwen = QwenFCHandler.__new__(QwenFCHandler)  # decode_execute reads no instance state
    openai = OpenAICompletionsHandler.__new__(OpenAICompletionsHandler)
    openai.is_fc_model = True
    return {"prompt": qwen, "fc": openai}


def _turns(handler, responses: list, n_turns: int, is_empty) -> list[list]:
    """Per user turn, the step responses BFCL's inference loop records from `responses`."""
    turns, it = [], iter(responses)
    for _ in range(n_turns):
        turn = []
        for response in it:
            turn.append(response)
            try:
                if is_empty(handler.decode_execute(response, has_tool_call_tag=False)):
                    break
            except Exception:  # noqa: BLE001 - BFCL: "Failed to decode the model response. Proceed to next turn."
                break
        turns.append(turn)
    return turns


def main_decode(path: str) -> None:
    """One JSON line per step of STEPS.json (`[{"style": ..., "response": ...}]`): {"calls": ...}."""
    with bfcl_in_process() as (handlers, is_empty):
        for step in json.loads(Path(path).read_text()):
            print(json.dumps({"calls": decode_step(handlers, is_empty, step["style"], step["response"])}))


def main(path: str) -> None:
    _install_stand_ins()
    evaluate, is_empty = _evaluator()
    handlers = _handlers()
    for i, case in enumerate(json.loads(Path(path).read_text())):
        handler = handlers[case["style"]]
        entry, ground_truth = case["entry"], case["ground_truth"]
        responses = [recorded(handler, case["style"], r) for r in case["responses"]]
        turns = _turns(handler, responses, len(ground_truth), is_empty)
        result = evaluate(
            handler, entry["id"], turns, ground_truth, dict(entry), f"direct_{i}", f"multi_turn_{case['category']}"
        )
        error = result.get("error") or {}
        print(json.dumps({"case": case["name"], "valid": result["valid"], "error_type": error.get("error_type")}))


if __name__ == "__main__":
    if sys.argv[1] == "--decode":
        main_decode(sys.argv[2])
    else:
        main(sys.argv[1])
