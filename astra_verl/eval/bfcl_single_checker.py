"""BFCL's single-turn verdict on one model result: the program of a sandbox session.

This file's text is the sandbox program `bfcl_single.checker_program()` sends; it is never
imported by the evaluation process. It calls BFCL's own per-entry evaluation functions,
`_evaluate_single_ast_entry` and `_evaluate_single_relevance_entry` from
`bfcl_eval.eval_checker.eval_runner`, with the arguments `bfcl evaluate` gives them
(`ast_file_runner`, `relevance_file_runner`). It runs in the sandbox because BFCL's prompting
decoder `eval`s parts of the model's text (`resolve_ast_by_type`: a binary operation or a
lambda in an argument): model-written code.

`eval_runner` imports every provider SDK BFCL has a handler for (through its model table) and
numpy/pandas/filelock for its leaderboard files; bfcl-eval is installed without them and the
session sees only its exposed packages. Each root in `STAND_INS` that cannot be imported is
replaced, in this session process only, by an inert module: a name imported from it is a
callable, subclassable, decorating no-op. None of them is on the path of a verdict: the
decoders are `json`, `ast` and tree-sitter (exposed, real), the checker is pure Python. The
agreement test (tests/eval/test_bfcl_single_agreement.py) compares every verdict with BFCL run
in a normal process where those that are installed are real.
"""

import importlib.abc
import importlib.machinery
import json
import os
import sys
import tempfile
import types

STAND_INS = frozenset(
    {
        "anthropic", "boto3", "cohere", "datamodel_code_generator", "dotenv", "filelock", "google", "httpx",
        "mistralai", "numpy", "openai", "org", "overrides", "pandas", "qwen_agent", "requests", "tornado",
        "tqdm", "writerai",
    }
)  # fmt: skip
# A registered BFCL model name per call style: the checker reads only its `underscore_to_dot`
# (an OpenAI-style FC model sends "a.b" as "a_b", so the checker compares "a_b"; prompting keeps dots).
CHECKER_MODELS = {"fc": "gpt-4o-2024-11-20-FC", "prompting": "gpt-4o-2024-11-20"}
DETAIL_CHARS = 4000


class _Inert:
    """Anything from a stand-in module: callable, a decorator returning what it decorates, a base class."""

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


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on `sys.meta_path`: consulted only for a module no real finder has."""

    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in STAND_INS:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = lambda attr: _Inert()
        return module

    def exec_module(self, module):
        pass


def _bfcl():
    if not any(isinstance(f, _StandInFinder) for f in sys.meta_path):
        sys.meta_path.append(_StandInFinder())
    # BFCL's config creates its result/score folders under BFCL_PROJECT_ROOT when imported (by
    # default beside the package, read-only here); nothing is written to them by a verdict
    os.environ.setdefault("BFCL_PROJECT_ROOT", tempfile.mkdtemp(prefix="bfcl_project_"))
    from bfcl_eval.constants.enums import Language, ReturnFormat
    from bfcl_eval.eval_checker import eval_runner
    from bfcl_eval.model_handler.api_inference.openai_completion import OpenAICompletionsHandler
    from bfcl_eval.utils import is_java, is_js, is_relevance_or_irrelevance

    return types.SimpleNamespace(
        runner=eval_runner,
        handler_class=OpenAICompletionsHandler,
        Language=Language,
        ReturnFormat=ReturnFormat,
        is_java=is_java,
        is_js=is_js,
        is_relevance=is_relevance_or_irrelevance,
    )


def _handler(bfcl, style):
    """BFCL's OpenAI chat-completions handler, in FC or prompting mode; `decode_ast` reads only
    `is_fc_model` (the constructor would build an OpenAI client)."""
    handler = bfcl.handler_class.__new__(bfcl.handler_class)
    handler.is_fc_model = style == "fc"
    return handler


def _short(value):
    text = value if isinstance(value, str) else json.dumps(value, default=repr, ensure_ascii=False)
    return text if len(text) <= DETAIL_CHARS else text[:DETAIL_CHARS] + "...(truncated)"


def check(entry_id, category, style, model_result, prompt_entry, possible_answer):
    """BFCL's verdict: {"valid", "error_type", "error", "decoded"} (strings capped)."""
    bfcl = _bfcl()
    handler = _handler(bfcl, style)
    model_name = CHECKER_MODELS[style]
    if bfcl.is_relevance(category):
        result = bfcl.runner._evaluate_single_relevance_entry(
            handler, entry_id, model_result, prompt_entry, model_name, category
        )
    else:
        if bfcl.is_java(category):
            language, return_format = bfcl.Language.JAVA, bfcl.ReturnFormat.JAVA
        elif bfcl.is_js(category):
            language, return_format = bfcl.Language.JAVASCRIPT, bfcl.ReturnFormat.JAVASCRIPT
        else:
            language, return_format = bfcl.Language.PYTHON, bfcl.ReturnFormat.PYTHON
        result = bfcl.runner._evaluate_single_ast_entry(
            handler,
            entry_id,
            model_result,
            possible_answer,
            prompt_entry,
            model_name,
            category,
            language=language,
            return_format=return_format,
            has_tool_call_tag=False,
        )
    if result["valid"]:
        return {"valid": True, "error_type": None, "error": "", "decoded": ""}
    decoded = result.get("model_result_decoded", result.get("decoded_result"))
    return {
        "valid": False,
        "error_type": str(result.get("error_type") or "unknown"),
        "error": _short(result.get("error") or ""),
        "decoded": _short(decoded) if decoded is not None else "",
    }
