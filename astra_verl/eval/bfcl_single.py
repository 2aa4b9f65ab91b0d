"""BFCL v4 single-turn categories on astra-verl's stack: entries, requests, BFCL's verdict, the run.

What BFCL does for one single-turn entry (bfcl-eval's `BaseHandler.inference_single_turn_*`,
`OpenAICompletionsHandler`, `eval_runner.evaluate_task`), and what this module does the same way:
- Entries: `bfcl_eval.utils.load_dataset_entry` with the language hint in the function docs
  (as generation loads them), and without it for the checker (as `evaluate_task` loads them);
  answers from `load_ground_truth_entry`, aligned by index (irrelevance and live_relevance
  have none).
- Request, FC style (`fc`, an OpenAI function-calling model): the entry's first turn as the
  messages and the functions converted by BFCL's `convert_to_tool` (OpenAI chat-completions
  style: "." in names becomes "_", BFCL types mapped to JSON Schema) as `tools`.
- Request, prompting style (`prompting`): BFCL's `system_prompt_pre_processing_chat_model`
  puts its system prompt (function docs as JSON, calls as `[func(a=1)]`) before the turn; no
  `tools`.
- The model result BFCL stores: FC, the reply's calls as `[{name: arguments string}]`, or its
  text when it has none; prompting, its text.
- Verdict: BFCL's own `_evaluate_single_ast_entry` / `_evaluate_single_relevance_entry` with
  `bfcl evaluate`'s arguments, run in a fresh sandbox session per entry
  (`bfcl_single_checker.py`: BFCL's prompting decoder `eval`s parts of model text).

Where a run differs from BFCL's: an entry whose request fails (endpoint down, context too
long) is an error record, counted as a failure and run again by the next run; BFCL stores
the error text as the result and scores that (which passes an irrelevance entry).
"""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import json
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from tqdm.auto import tqdm

from astra_foundation.errors import UserError
from astra_foundation.sandbox.protocol import ErrorKind, Module, Program, Sandbox
from astra_verl.eval.results import ResultRecord, ResultsFile
from env_registry.families.bfcl_package import bfcl_module

RESULTS_VERSION = 1
STYLES = ("fc", "prompting")
NON_LIVE = (
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
)
LIVE = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance", "live_relevance")
CATEGORIES = NON_LIVE + LIVE
GROUPS = {"non_live": NON_LIVE, "live": LIVE, "single_turn": CATEGORIES}
RELEVANCE = ("irrelevance", "live_irrelevance", "live_relevance")  # scored by BFCL's relevance rule
CHECKER_MODULE = "bfcl_single_checker"
# What the checker session imports: BFCL, its Java/JavaScript parsers, and what its decoders'
# module imports at the top (tenacity); see bfcl_single_checker.py for the rest.
SANDBOX_PACKAGES = ("bfcl_eval", "tree_sitter", "tree_sitter_java", "tree_sitter_javascript", "tenacity")
INSTALL = (
    "pip install 'astra-verl[bfcl]' && pip install --no-deps bfcl-eval==2026.3.23 (scripts/bootstrap.sh does both)"
)


def missing_packages() -> list[str]:
    """The packages of SANDBOX_PACKAGES that are not installed (empty when the checker can run)."""
    return [name for name in SANDBOX_PACKAGES if importlib.util.find_spec(name) is None]


class BfclSingleError(RuntimeError):
    """The checker could not run at all (sandbox configuration), not a verdict on the model: a bug
    in how the pool was configured, kept with its traceback."""


class BfclSingleUserError(UserError):
    """The entries asked for (--ids) or the installed bfcl-eval data cannot serve the run; the
    message says what to change (the results file's errors: `results.ResultsFileError`)."""


@dataclass(frozen=True)
class SingleEntry:
    id: str
    category: str
    question: list[Any]  # BFCL's turns; single-turn entries have one
    functions: list[dict[str, Any]]  # with BFCL's language hint: what the model is shown
    checker_entry: dict[str, Any]  # the entry as `bfcl evaluate` hands it to the checker
    possible_answer: list[Any] | None  # None for the relevance categories


def _bfcl_utils():
    """bfcl_eval's data helpers (imported on use: the CLI's --help must not pay for them; through
    `bfcl_module`, so bfcl_eval makes no folders inside site-packages)."""
    return bfcl_module("bfcl_eval.utils")


def parse_categories(text: str) -> list[str]:
    """Comma-separated category names or groups (non_live, live, single_turn), in BFCL's order."""
    names: set[str] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if part in GROUPS:
            names.update(GROUPS[part])
        elif part in CATEGORIES:
            names.add(part)
        else:
            raise ValueError(
                f"unknown category {part!r}; choose from {', '.join(CATEGORIES)} or a group ({', '.join(GROUPS)})"
            )
    return [c for c in CATEGORIES if c in names]


def _category_entries(category: str) -> list[SingleEntry]:
    utils = _bfcl_utils()
    shown = utils.load_dataset_entry(category, include_prereq=False, include_language_specific_hint=True)
    plain = utils.load_dataset_entry(category, include_prereq=False, include_language_specific_hint=False)
    answers = None if category in RELEVANCE else utils.load_ground_truth_entry(category)
    if answers is not None and len(answers) != len(shown):
        raise BfclSingleUserError(
            f"{category}: {len(shown)} entries but {len(answers)} answers in bfcl-eval's data; reinstall it: {INSTALL}"
        )
    out = []
    for i, (entry, bare) in enumerate(zip(shown, plain, strict=True)):
        out.append(
            SingleEntry(
                id=entry["id"],
                category=category,
                question=entry["question"],
                functions=entry["function"],
                checker_entry=bare,
                possible_answer=answers[i]["ground_truth"] if answers is not None else None,
            )
        )
    return out


def category_size(category: str) -> int:
    """The number of entries BFCL has in `category` (the weights of its live aggregate)."""
    return len(_bfcl_utils().load_dataset_entry(category, include_prereq=False, include_language_specific_hint=False))


def load_entries(
    categories: Sequence[str],
    *,
    ids: Iterable[str] | None = None,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
) -> list[SingleEntry]:
    """The entries of `categories`: all, those in `ids`, the first `limit`, or a seeded random
    `sample` of each category (the same entries for the same seed, in BFCL's order)."""
    wanted = set(ids) if ids else None
    out: list[SingleEntry] = []
    for category in categories:
        entries = _category_entries(category)
        if wanted is not None:
            entries = [e for e in entries if e.id in wanted]
        if sample is not None and sample < len(entries):
            keep = sorted(random.Random(f"bfcl-single:{seed}:{category}").sample(range(len(entries)), sample))
            entries = [entries[i] for i in keep]
        if limit is not None:
            entries = entries[:limit]
        out.extend(entries)
    if wanted is not None:
        missing = wanted - {e.id for e in out}
        if missing:
            raise BfclSingleUserError(
                f"no such entries in {', '.join(categories)}: {sorted(missing)[:10]}; check --ids and --categories"
            )
    return out


# -- requests and results ----------------------------------------------------------------------


def request(entry: SingleEntry, style: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """(messages, tools) of the entry's request as BFCL's OpenAI chat-completions handler builds it."""
    enums = bfcl_module("bfcl_eval.constants.enums")
    type_mappings = bfcl_module("bfcl_eval.constants.type_mappings")
    handler_utils = bfcl_module("bfcl_eval.model_handler.utils")

    turn = copy.deepcopy(entry.question[0])
    if style == "fc":
        style_ = enums.ModelStyle.OPENAI_COMPLETIONS
        tools = handler_utils.convert_to_tool(entry.functions, type_mappings.GORILLA_TO_OPENAPI, style_)
        return turn, tools
    if style == "prompting":
        messages = handler_utils.system_prompt_pre_processing_chat_model(turn, copy.deepcopy(entry.functions), entry.id)
        return messages, None
    raise ValueError(f"call style {style!r}: choose from {STYLES}")


def model_result(completion: Any, style: str) -> Any:
    """What BFCL stores as the entry's result: FC, `[{name: arguments}]` or the text when the
    reply has no calls; prompting, the text."""
    if style == "fc" and completion.tool_calls:
        return [{call.name: call.arguments} for call in completion.tool_calls]
    return completion.text


def checker_program() -> Program:
    source = (Path(__file__).parent / "bfcl_single_checker.py").read_text(encoding="utf-8")
    return Program((Module(CHECKER_MODULE, source),))


async def verdict(sandbox: Sandbox, entry: SingleEntry, style: str, result: Any) -> dict[str, Any]:
    """BFCL's verdict on `result` (a fresh sandbox session): valid, error_type, error, decoded."""
    args = {
        "entry_id": entry.id,
        "category": entry.category,
        "style": style,
        "model_result": result,
        "prompt_entry": entry.checker_entry,
        "possible_answer": entry.possible_answer,
    }
    session = await sandbox.open_session(checker_program())
    try:
        out = await sandbox.call(session, CHECKER_MODULE, "check", args)
    finally:
        await sandbox.close_session(session)
    if out.ok:
        return json.loads(out.output)
    if out.error_kind in (ErrorKind.LOAD_ERROR, ErrorKind.NOT_FOUND):
        raise BfclSingleError(
            f"{entry.id}: the sandbox cannot load BFCL's checker ({out.message}); "
            f"its pool must expose the packages {list(SANDBOX_PACKAGES)}"
        )
    # the model's output made BFCL's decoder or checker fail (timeout, memory): a failed verdict
    kind = out.error_kind.value if out.error_kind else "error"
    return {"valid": False, "error_type": f"astra:checker_{kind}", "error": out.message, "decoded": ""}


class SingleResult(ResultRecord):
    """One line of `<out>/results.jsonl` of a single-turn run (`astra_verl.eval.results`: one model
    and call style per file)."""

    section = "eval bfcl-single results record"
    RUN_FIELDS: ClassVar[tuple[str, ...]] = ("model", "style")

    version: Literal[1] = RESULTS_VERSION
    id: str
    category: str
    style: str
    model: str
    status: Literal["scored", "error"]
    valid: bool
    verdict: dict[str, Any] | None = None  # status "scored": BFCL's checker's (valid, error_type, error, decoded)
    result: Any = None  # status "scored": the model result BFCL scores
    usage: dict[str, Any] | None = None
    elapsed_s: float | None = None
    error: str | None = None  # status "error"


def results_file(path: str | Path, style: str | None = None, model: str | None = None) -> ResultsFile[SingleResult]:
    """The single-turn results file at `path`; `style` and `model`: the run that appends (a file of
    another model's or style's is refused here: their verdicts are not comparable), None to read."""
    run = None if model is None else {"model": model, "style": style}
    return ResultsFile(path, SingleResult, run=run)


# -- the run ------------------------------------------------------------------------------


@dataclass
class Run:
    """One model, one call style, a results file; `ask(messages, tools)` returns a Completion."""

    entries: list[SingleEntry]
    ask: Callable[[list[dict[str, Any]], list[dict[str, Any]] | None], Any]
    sandbox: Sandbox
    results: ResultsFile[SingleResult]
    style: str
    model: str
    errors: tuple[type[BaseException], ...] = ()

    def record(self, entry: SingleEntry, **fields: Any) -> SingleResult:
        return SingleResult(id=entry.id, category=entry.category, style=self.style, model=self.model, **fields)

    async def one(self, entry: SingleEntry) -> bool:
        """Run and score one entry, append its record; True when it ran (an error record is False)."""
        t0 = time.perf_counter()
        messages, tools = request(entry, self.style)
        try:
            completion = await self.ask(messages, tools)
        except self.errors as exc:
            error = f"{type(exc).__name__}: {exc}"
            self.results.append(self.record(entry, status="error", valid=False, error=error))
            return False
        result = model_result(completion, self.style)
        judged = await verdict(self.sandbox, entry, self.style, result)
        usage = {
            "prompt_tokens": completion.usage.prompt_tokens,
            "completion_tokens": completion.usage.completion_tokens,
        }
        self.results.append(
            self.record(
                entry,
                status="scored",
                valid=bool(judged["valid"]),
                verdict=judged,
                result=result,
                usage=usage,
                elapsed_s=round(time.perf_counter() - t0, 3),
            )
        )
        return True

    async def run(self, *, concurrency: int = 8, progress: bool = True) -> dict[str, int]:
        """Every entry not yet scored; on the first exception or Ctrl-C the rest are cancelled
        (scored records are already on disk)."""
        todo = [e for e in self.entries if not self.results.done(e.id)]
        counts = {"run": 0, "errors": 0, "skipped": len(self.entries) - len(todo)}
        gate = asyncio.Semaphore(max(1, concurrency))
        bar = tqdm(total=len(todo), desc="bfcl-single", unit="entry", disable=not progress)

        async def guarded(entry: SingleEntry) -> None:
            async with gate:
                ran = await self.one(entry)
            counts["run"] += 1
            counts["errors"] += not ran
            bar.update(1)

        tasks = [asyncio.ensure_future(guarded(e)) for e in todo]
        try:
            if tasks:
                await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            bar.close()
        return counts
