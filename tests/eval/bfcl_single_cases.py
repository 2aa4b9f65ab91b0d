"""Model results for BFCL single-turn entries: ground truth in each call style, and perturbations.

Ground truth (`truth`): each call of the entry's possible answer, each parameter's first allowed
value, or none where "" is allowed ("may be left out"), rendered as the style's model output:
- fc: `[{name: arguments JSON}]` as BFCL's OpenAI handler stores a reply's calls ("." in a name
  sent as "_", as `convert_to_tool` renames it); Java and JavaScript values as `source_text`;
- prompting: `[name(param=value, ...)]`, Python `repr` values (Python categories only: Java
  and JavaScript prompting answers are written by hand in the perturbation corpus).
Relevance categories have no answer: irrelevance's truth is a refusal in text, live_relevance's
a call of the entry's first function.
"""

from __future__ import annotations

import json
import re
from typing import Any

JAVA_JS = ("simple_java", "simple_javascript")
SKIP = object()


def first_value(allowed: list[Any]) -> Any:
    if "" in allowed or not allowed:  # optional: left out (some answers allow a parameter the function lacks)
        return SKIP
    return nested(allowed[0])


def nested(value: Any) -> Any:
    """A dict in a possible answer maps keys to allowed lists; a list may hold such dicts."""
    if isinstance(value, dict):
        out = {k: first_value(v) if isinstance(v, list) else v for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not SKIP}
    if isinstance(value, list):
        return [nested(v) for v in value]
    return value


def source_text(value: Any, category: str) -> Any:
    """A Java/JavaScript value as BFCL's checker reads it in FC mode: JavaScript values and Java
    booleans as their source text; Java's other non-string values (long, arrays, maps) typed."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if category == "simple_java" or isinstance(value, str):
        return value
    return json.dumps(value) if isinstance(value, list | dict) else str(value)


def truth_calls(entry: Any) -> list[tuple[str, dict[str, Any]]]:
    calls = []
    for call in entry.possible_answer:
        ((name, params),) = call.items()
        args = {k: first_value(v) for k, v in params.items()}
        calls.append((name, {k: v for k, v in args.items() if v is not SKIP}))
    return calls


def fc_result(entry: Any, calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, str]]:
    out = []
    for name, args in calls:
        if entry.category in JAVA_JS:
            args = {k: source_text(v, entry.category) for k, v in args.items()}
        out.append({re.sub(r"\.", "_", name): json.dumps(args)})
    return out


def prompting_result(calls: list[tuple[str, dict[str, Any]]]) -> str:
    return "[" + ", ".join(f"{n}({', '.join(f'{k}={v!r}' for k, v in a.items())})" for n, a in calls) + "]"


def relevance_calls(entry: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(entry.functions[0]["name"], {})]


def truth(entry: Any, style: str) -> Any:
    if "irrelevance" in entry.category:
        return "I cannot answer this with the functions I have."
    calls = relevance_calls(entry) if entry.possible_answer is None else truth_calls(entry)
    return fc_result(entry, calls) if style == "fc" else prompting_result(calls)


def all_plain(entry: Any) -> bool:
    """Every answer value a string or a boolean (Java ground truth rendered without Java syntax)."""
    return all(
        all(isinstance(v, str | bool) for v in allowed)
        for call in entry.possible_answer
        for params in call.values()
        for allowed in params.values()
    )


def _fc(name: str, args: dict[str, Any]) -> list[dict[str, str]]:
    return [{name: json.dumps(args)}]


def perturbations(by_id: dict[str, Any]) -> list[tuple[str, str, str, Any]]:
    """(case name, style, entry id, model result): what BFCL's checker must judge as we do.

    simple_python_0: calculate_triangle_area(base=10, height=5, unit="units" optional);
    parallel_0: spotify.play(artist, duration) twice; multiple_0: triangle_properties.get among others;
    live_simple_0-0-0: get_user_info(user_id=7890, special="black")."""
    tri = "calculate_triangle_area"
    cases = [
        ("fc wrong value", "fc", "simple_python_0", _fc(tri, {"base": 11, "height": 5})),
        ("fc missing required", "fc", "simple_python_0", _fc(tri, {"base": 10})),
        ("fc extra call", "fc", "simple_python_0", _fc(tri, {"base": 10, "height": 5}) * 2),
        ("fc wrong function", "fc", "simple_python_0", _fc("calculate_circle_area", {"base": 10, "height": 5})),
        ("fc int as string", "fc", "simple_python_0", _fc(tri, {"base": "10", "height": 5})),
        ("fc int as float", "fc", "simple_python_0", _fc(tri, {"base": 10.0, "height": 5})),
        ("fc unknown parameter", "fc", "simple_python_0", _fc(tri, {"base": 10, "height": 5, "color": "red"})),
        ("fc optional given", "fc", "simple_python_0", _fc(tri, {"base": 10, "height": 5, "unit": "units"})),
        ("fc arguments not JSON", "fc", "simple_python_0", [{tri: "{base: 10"}]),
        ("fc empty arguments", "fc", "simple_python_0", [{tri: ""}]),
        ("fc text instead of calls", "fc", "simple_python_0", "The area is 25."),
        ("fc no calls", "fc", "simple_python_0", []),
        ("fc dotted name kept", "fc", "multiple_0", _fc("triangle_properties.get", {"side1": 5, "side2": 4, "side3": 3})),
        ("fc parallel swapped", "fc", "parallel_0", list(reversed(truth(by_id["parallel_0"], "fc")))),
        ("fc parallel one missing", "fc", "parallel_0", truth(by_id["parallel_0"], "fc")[:1]),
        ("fc string case and spaces", "fc", "live_simple_0-0-0", _fc("get_user_info", {"user_id": 7890, "special": " Black."})),
        ("fc string other word", "fc", "live_simple_0-0-0", _fc("get_user_info", {"user_id": 7890, "special": "white"})),
        ("fc irrelevance called", "fc", "irrelevance_0", truth(by_id["simple_python_0"], "fc")),
        ("fc irrelevance empty args", "fc", "irrelevance_0", [{tri: "{}"}]),
        ("fc relevance text", "fc", "live_relevance_0-0-0", "Sure, here it is."),
        ("prompting wrong value", "prompting", "simple_python_0", f"[{tri}(base=11, height=5)]"),
        ("prompting missing required", "prompting", "simple_python_0", f"[{tri}(base=10)]"),
        ("prompting extra call", "prompting", "simple_python_0", f"[{tri}(base=10, height=5), {tri}(base=10, height=5)]"),
        ("prompting wrong function", "prompting", "simple_python_0", "[triangle_area(base=10, height=5)]"),
        ("prompting no brackets", "prompting", "simple_python_0", f"{tri}(base=10, height=5)"),
        ("prompting code fence", "prompting", "simple_python_0", f"```\n[{tri}(base=10, height=5)]\n```"),
        ("prompting arithmetic", "prompting", "simple_python_0", f"[{tri}(base=5+5, height=5)]"),
        ("prompting float for int", "prompting", "simple_python_0", f"[{tri}(base=10.0, height=5)]"),
        ("prompting prose", "prompting", "simple_python_0", "The triangle's area is 25 square units."),
        ("prompting positional", "prompting", "simple_python_0", f"[{tri}(10, 5)]"),
        ("prompting string case", "prompting", "live_simple_0-0-0", "[get_user_info(user_id=7890, special='BLACK')]"),
        ("prompting irrelevance empty list", "prompting", "irrelevance_0", "[]"),
        ("prompting irrelevance called", "prompting", "irrelevance_0", f"[{tri}(base=10, height=5)]"),
        ("prompting java call", "prompting", "simple_java_0",
         "[GeometryPresentation.createPresentation(controller=mapController, parent=mapArea)]"),
        ("prompting java wrong value", "prompting", "simple_java_0",
         "[GeometryPresentation.createPresentation(controller=otherController, parent=mapArea)]"),
        ("prompting javascript call", "prompting", "simple_javascript_0",
         "[validateUserInput(inputField=userInputField, isComplete=true)]"),
        ("prompting javascript wrong type", "prompting", "simple_javascript_0",
         "[validateUserInput(inputField=userInputField, isComplete=5)]"),
    ]  # fmt: skip
    return cases
