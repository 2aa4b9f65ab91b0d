"""Step 1: a QA instance with a decomposition trace, from a seed (docs/method.md §2.1).

Input `Seed`, output `QA`. One LLM call (plus one repair round): the reply must parse as a
trace (`data_synth.env.trace.parse_trace`): ids unique, dependencies known and acyclic,
sub-answers values, the number of sub-questions within the seed's hop range. Rejections are
`env.decompose:<kind>` with the trace's kinds.
"""

from __future__ import annotations

from data_synth.env.context import EnvContext
from data_synth.env.records import QA, Seed
from data_synth.env.trace import parse_trace
from data_synth.pipeline import Step
from data_synth.prompts import load_prompt

PROMPT = "env/decompose"


def decompose_messages(seed: Seed) -> list[dict]:
    p = load_prompt(PROMPT)
    common = {
        "domain": seed.domain,
        "language": "English" if seed.language == "en" else seed.language,
        "hop_min": seed.hop_min,
        "hop_max": seed.hop_max,
        "target_type": seed.target_type or "that fits best",
    }
    if seed.mode == "domain":
        corpus = f"Background knowledge:\n<<<\n{seed.text}\n>>>\n" if seed.text else ""
        return p.messages("user.domain", corpus=corpus, **common)
    if seed.mode == "context":
        return p.messages("user.context", passage=seed.text, **common)
    if seed.mode == "question":
        return p.messages("user.question", question=seed.text, **common)
    examples = "\n".join(f"- {e}" for e in seed.examples) or "- (none given)"
    return p.messages(
        "user.taxonomy", category=seed.category or seed.domain, description=seed.text, examples=examples, **common
    )


class Decompose(Step[Seed, QA]):
    name = "env.decompose"
    input_type = Seed
    output_type = QA

    async def process(self, record: Seed, ctx: EnvContext) -> QA:
        def check(value):
            return parse_trace(value, hop_min=record.hop_min, hop_max=record.hop_max)

        reply = await ctx.llm.complete_json(
            decompose_messages(record), step=self.name, check=check, sample=record.sample
        )
        question, final, claimed, nodes, notes = reply.value
        return QA(
            key=record.key,
            seed=record,
            question=question,
            final_answer=final,
            claimed_scenario_type=claimed,
            nodes=nodes,
            notes=notes,
            model=ctx.llm.model,
            prompts={self.name: load_prompt(PROMPT).tag},
        )
