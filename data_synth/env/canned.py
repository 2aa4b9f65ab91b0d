"""A deterministic stand-in model for the environment prompts: dry runs, tests, benchmarks.

    python -m data_synth env run ... --responder data_synth.env.canned:respond

This is NOT a model. It reads the values it needs out of each prompt of
`data_synth/prompts/env` and answers in the format that prompt asks for, with valid content:
traces about city temperatures, airport codes and delays; schemas, calls and implementations
(a table of the calls it was asked to serve) that pass the sandbox check; partitions by tool
name; merges that serve every member. It lets the whole pipeline run end to end without a
server, and it is the fake endpoint's answer in `bench/synth_throughput.py`. Tests wrap it
to inject malformed replies at chosen steps.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from data_synth.env.calls import parse_call

CITIES = ["Lyon", "Porto", "Denver", "Osaka", "Quito", "Tallinn", "Perth", "Accra", "Bergen", "Cusco", "Dakar", "Hanoi"]
AIRPORTS = {
    "Lyon": "LYS",
    "Porto": "OPO",
    "Denver": "DEN",
    "Osaka": "KIX",
    "Quito": "UIO",
    "Tallinn": "TLL",
    "Perth": "PER",
    "Accra": "ACC",
    "Bergen": "BGO",
    "Cusco": "CUZ",
    "Dakar": "DSS",
    "Hanoi": "HAN",
}


def _h(text: str) -> int:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:12], 16)


def _user(payload: dict[str, Any]) -> str:
    return next(m["content"] for m in payload["messages"] if m["role"] == "user")


def _json_block(text: str) -> Any:
    m = re.search(r"```json\n(.*?)\n```", text, re.DOTALL)
    return json.loads(m.group(1)) if m else None


def _node(uid: str, level: int, q: str, a: str, deps: list[str] | None) -> dict[str, Any]:
    return {
        "_uuid": uid,
        "hop_level": level,
        "sub_question": q,
        "sub_answer": a,
        "dependency": deps,
        "is_parallel": False,
    }


def _temp(i: int, city: str, seed: int) -> tuple[str, float]:
    return f"What is the current temperature in {city}?", round(((seed >> (4 * i)) % 300) / 10 - 5, 1)


def decompose(prompt: str) -> dict[str, Any]:
    seed = _h(prompt)
    lo, hi = (int(x) for x in re.search(r"(\d+) to (\d+)\s+sub-questions", prompt).groups())
    m = re.search(r"scenario type (\w+)", prompt)
    target = m.group(1) if m and m.group(1) != "that" else "parallel_multi_hop"
    cities = [CITIES[(seed + 5 * k) % len(CITIES)] for k in range(len(CITIES))]
    cities = list(dict.fromkeys(cities))
    if target == "multi_hop":
        city = cities[0]
        code = AIRPORTS[city]
        delay = 5 + seed % 50
        nodes = [
            _node("q1", 1, f"What is the IATA code of the main airport of {city}?", code, None),
            _node(
                "q2",
                2,
                f"What is the current departure delay at the airport with code {code}?",
                f"{delay} minutes",
                ["q1"],
            ),
        ]
        question, final = f"How long are departures delayed at {city}'s main airport right now?", f"{delay} minutes"
    else:
        n_temps = {"single_hop": 1, "parallel_single_hop": 2}.get(target, 2)
        n_total = max(lo, n_temps + (target == "parallel_multi_hop"))
        n_temps = n_total - (target == "parallel_multi_hop")
        nodes, temps = [], []
        for i in range(n_temps):
            q, t = _temp(i, cities[i], seed)
            temps.append(t)
            nodes.append(_node(f"q{i + 1}", 1, q, f"{t} °C", None))
        if target == "parallel_multi_hop":
            a, b = temps[0], temps[1]
            diff = round(a - b, 1)
            nodes.append(
                _node(
                    f"q{n_temps + 1}",
                    2,
                    f"What is the difference between {a} °C and {b} °C?",
                    f"{diff} °C",
                    ["q1", "q2"],
                )
            )
            question = f"How much warmer is {cities[0]} than {cities[1]} right now?"
            final = f"{diff} °C"
        else:
            question = "What are the current temperatures in " + ", ".join(cities[:n_temps]) + "?"
            final = ", ".join(f"{c}: {t} °C" for c, t in zip(cities, temps, strict=False))
    del nodes[hi:]
    return {"question": question, "final_answer": final, "scenario_type": target, "trace": nodes}


def _trace_ids(prompt: str) -> list[tuple[str, bool]]:
    out = []
    for line in prompt.splitlines():
        if line.startswith('{"_uuid"'):
            item = json.loads(line)
            out.append((item["_uuid"], bool(item.get("dependency"))))
    return out


def schema_for(request: str) -> dict[str, Any]:
    def tool(name: str, desc: str, props: dict[str, Any]) -> dict[str, Any]:
        params = {"type": "object", "properties": props, "required": list(props)}
        return {"name": name, "description": desc, "parameters": params}

    if "temperature in" in request:
        return tool(
            "get_current_temperature",
            "Current air temperature of a city.",
            {"city": {"type": "string", "description": "city name"}},
        )
    if "IATA code" in request:
        return tool(
            "lookup_airport_code",
            "IATA code of a city's main airport.",
            {"city": {"type": "string", "description": "city name"}},
        )
    if "departure delay" in request:
        return tool(
            "get_departure_delay",
            "Current mean departure delay at an airport.",
            {"airport_code": {"type": "string", "description": "IATA code"}},
        )
    return tool(
        "subtract_values",
        "Difference a - b of two measurements.",
        {"a": {"type": "number", "description": "minuend"}, "b": {"type": "number", "description": "subtrahend"}},
    )


def call_for(request: str, schema: dict[str, Any]) -> str:
    name = schema["name"]
    if name == "subtract_values":
        a, b = re.findall(r"(-?\d+(?:\.\d+)?) °C", request)[:2]
        return f"{name}(a={float(a)}, b={float(b)})"
    if name == "get_departure_delay":
        return f'{name}(airport_code="{re.search(r"code ([A-Z]{3})", request).group(1)}")'
    city = re.search(r"(?:temperature in|airport of) ([A-Z][\w ]+?)\?", request).group(1)
    return f'{name}(city="{city}")'


def source_for(name: str, parameters: dict[str, Any], records: list[tuple[dict[str, Any], str]]) -> str:
    """A table-driven implementation serving exactly `records` ([(args, answer)])."""
    props = list(parameters.get("properties", {}))
    required = set(parameters.get("required", []))
    signature = ", ".join([p for p in props if p in required] + [f"{p}=None" for p in props if p not in required])
    given = ", ".join(f"{p!r}: {p}" for p in props)
    return (
        f"RECORDS = {records!r}\n\n\n"
        f"def {name}({signature}):\n"
        f"    given = {{k: v for k, v in {{{given}}}.items() if v is not None}}\n"
        "    for args, answer in RECORDS:\n"
        "        if all(given.get(k) == v for k, v in args.items()):\n"
        '            return {"result": answer}\n'
        '    return {"error": "no record matches " + repr(given)}\n'
    )


def respond(step: str, payload: dict[str, Any]) -> str:
    prompt = _user(payload)
    if step == "env.decompose":
        return "```json\n" + json.dumps(decompose(prompt), ensure_ascii=False) + "\n```"
    if step == "env.necessity":
        return json.dumps(
            {"labels": [{"_uuid": i, "tool_necessity": True, "reason": "lookup"} for i, _ in _trace_ids(prompt)]}
        )
    if step == "env.verify.dependency":
        return json.dumps(
            {"nodes": [{"_uuid": i, "missing": [], "redundant": [], "reason": ""} for i, _ in _trace_ids(prompt)]}
        )
    if step == "env.verify.atomicity":
        return json.dumps({"nodes": [{"_uuid": i, "atomic": True, "reason": ""} for i, _ in _trace_ids(prompt)]})
    if step == "env.verify.sequential":
        return json.dumps({"nodes": [{"_uuid": i, "order_ok": True, "reason": ""} for i, d in _trace_ids(prompt) if d]})
    if step == "env.verify.completeness":
        return json.dumps({"covers_question": True, "answer_follows": True, "reason": ""})
    request = re.search(r"Request: (.*)", prompt)
    if step == "env.tools.schema":
        return json.dumps(schema_for(request.group(1)))
    if step == "env.tools.scale":
        schema = _json_block(prompt)
        schema["parameters"]["properties"]["response_format"] = {
            "type": "string",
            "enum": ["compact", "detailed"],
            "description": "level of detail",
        }
        return json.dumps(schema)
    if step == "env.tools.call":
        schema = _json_block(prompt)
        return json.dumps({"call": call_for(prompt, schema)})
    if step == "env.tools.implement":
        schema = _json_block(prompt)
        m = re.search(r"contains the answer `(.*)`:\n\s*(.*)", prompt)
        _, args = parse_call(m.group(2), name=schema["name"])
        return "```python\n" + source_for(schema["name"], schema["parameters"], [(args, m.group(1))]) + "```"
    if step == "env.merge.cluster":
        groups: dict[str, list[str]] = {}
        for node_id, name in re.findall(r"^- (\w+): (\w+)\(", prompt, re.MULTILINE):
            groups.setdefault(name, []).append(node_id)
        return json.dumps({"clusters": [{"members": m, "intent": n} for n, m in groups.items()]})
    if step == "env.merge.merge":
        schema = _json_block(prompt)
        members = re.findall(
            r"^- (\w+): .*? -> answer: (.*) \(its own tool was called as (.*)\)$", prompt, re.MULTILINE
        )
        records = [(parse_call(call)[1], answer) for _, answer, call in members]
        source = source_for(schema["name"], schema["parameters"], records)
        calls = {node_id: call for node_id, _, call in members}
        return "```python\n" + source + "```\n```json\n" + json.dumps({"calls": calls}) + "\n```"
    raise ValueError(f"canned responder: no answer for step {step!r}")


_STEP_MARKERS = [
    ("You design question-answering tasks", "env.decompose"),
    ("You decide, for each step", "env.necessity"),
    ("Check DEPENDENCY CORRECTNESS", "env.verify.dependency"),
    ("Check ATOMICITY", "env.verify.atomicity"),
    ("Check SEQUENTIAL RATIONALITY", "env.verify.sequential"),
    ("Check COMPLETENESS", "env.verify.completeness"),
    ("Design the API function", "env.tools.schema"),
    ("Make this API more realistic", "env.tools.scale"),
    ("Write the call that answers", "env.tools.call"),
    ("Implement this API", "env.tools.implement"),
    ("Group these tools by intent", "env.merge.cluster"),
    ("These steps need the same operation", "env.merge.merge"),
]


def step_of(payload: dict[str, Any]) -> str:
    """The env step a request belongs to, read from its prompt (an HTTP request carries no step name)."""
    text = "\n".join(str(m.get("content", "")) for m in payload["messages"][:2])
    for marker, step in _STEP_MARKERS:
        if marker in text:
            return step
    raise ValueError("canned responder: the request matches no environment-synthesis prompt")


def respond_http(payload: dict[str, Any]) -> str:
    """`respond` for a fake HTTP endpoint (`python -m astra_foundation.llm.fake_server --responder ...`)."""
    return respond(step_of(payload), payload)
