"""Give the chat template's control tokens rows of their own before SFT, where a checkpoint has none.

Why: in the Qwen2.5-Coder-0.5B-Instruct GGUF that `python -m astra_verl.models qwen2.5-coder-0.5b`
converts, `<tool_call>` and `</tool_call>` have the same input-embedding and output rows (cosine
1.000, the norm of the other unused control tokens: the model never learnt them). The model can
then neither tell from its input whether a call is open nor put more weight on one tag than on the
other, and an SFT at lr 1e-5 barely moves the rows (cosine 0.9996 after 80 steps): 63 of its 252
BFCL replies opened a call with `</tool_call>`, which no parser reads as a call.

What `distinguish` does: for each added token the chat template uses whose row (input or output)
is a near-copy (cosine >= `SAME`) of another added token's, it sets both rows to the mean of the
rows of the token's own text spelt in ordinary tokens (`<` + `tool_call>` and `<` + `/tool_call>`),
the usual start for a new token. Rows of learnt tokens are left as they are, so a checkpoint
without such tokens (SmolLM2's) comes out unchanged (`distinguish` then returns no fixes and writes
nothing). The base column of a benchmark stays the checkpoint as converted; this prepares the
start of an SFT.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from astra_verl.models.errors import BuildError

# Cosine at or above which two rows count as one: learnt control tokens of Qwen2.5 sit below 0.9
# with each other; the untrained ones at 1.000.
SAME = 0.999
RECORD = "astra_distinct_tokens.json"
# save_pretrained writes the weights anew; the source's (one file or shards, and their index) are
# not copied, else a sharded source would leave stale shards beside the new ones.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".index.json")


class TokenFix(BaseModel):
    """One token given rows of its own: which, the added token it could not be told from, how alike
    they were (the higher of the input and output rows' cosines), and the ordinary tokens whose
    mean it now starts from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    token: str
    token_id: int
    twin: str
    cosine: float
    pieces: list[str]


class DistinctRecord(BaseModel):
    """`<out>/astra_distinct_tokens.json`: what `distinguish` changed, and from which checkpoint."""

    model_config = ConfigDict(extra="forbid")

    version: int = 1
    source: str
    fixes: list[TokenFix]


def template_tokens(tokenizer, template: str) -> dict[str, int]:
    """The added tokens whose text the chat template contains: the only rows an SFT on its
    conversations must tell apart."""
    return {text: i for text, i in tokenizer.get_added_vocab().items() if text in template}


def pieces(tokenizer, text: str) -> list[int]:
    """`text` in ordinary tokens: its first character and the rest encoded apart, so neither part
    matches the added token itself."""
    ids = tokenizer.encode(text[:1], add_special_tokens=False) + tokenizer.encode(text[1:], add_special_tokens=False)
    added = set(tokenizer.get_added_vocab().values())
    if not ids or added & set(ids):
        raise BuildError(f"token {text!r}: its text does not split into ordinary tokens ({ids}); it cannot be given a start of its own")  # fmt: skip
    return ids


def find_fixes(tokenizer, template: str, rows: list) -> list[TokenFix]:
    """Pure over the weight matrices `rows` (input embeddings, and output rows where untied): the
    template's added tokens that are a near-copy of another added token, with their pieces."""
    import torch

    added = tokenizer.get_added_vocab()
    others = torch.tensor(sorted(added.values()))
    names = {i: t for t, i in added.items()}
    fixes = []
    for text, i in template_tokens(tokenizer, template).items():
        best, twin = -1.0, ""
        for matrix in rows:
            sims = torch.nn.functional.cosine_similarity(matrix[others].float(), matrix[i].float()[None], dim=1)
            sims[others == i] = -1.0
            k = int(sims.argmax())
            if float(sims[k]) > best:
                best, twin = float(sims[k]), names[int(others[k])]
        if best >= SAME:
            ids = pieces(tokenizer, text)
            fixes.append(TokenFix(token=text, token_id=i, twin=twin, cosine=round(best, 6), pieces=tokenizer.convert_ids_to_tokens(ids)))  # fmt: skip
    return fixes


def apply_fixes(tokenizer, fixes: list[TokenFix], rows: list) -> None:
    """Set each fixed token's rows, in every matrix, to the mean of its pieces' rows."""
    import torch

    with torch.no_grad():
        for fix in fixes:
            ids = tokenizer.convert_tokens_to_ids(fix.pieces)
            for matrix in rows:
                matrix[fix.token_id] = matrix[ids].mean(dim=0)


def distinguish(model_dir: str | Path, out_dir: str | Path) -> tuple[Path, list[TokenFix]]:
    """The checkpoint to start an SFT from: `model_dir` itself where every template token has rows
    of its own, else a copy in `out_dir` with the fixes applied (reused when it was made from the
    same `model_dir`)."""
    src, out = Path(model_dir).resolve(), Path(out_dir).resolve()
    if not (src / "config.json").is_file():
        raise BuildError(f"{src}: not a Hugging Face checkpoint folder (no config.json); give the folder with the model's config.json and weights")  # fmt: skip
    record_path = out / RECORD
    if record_path.exists():
        record = DistinctRecord.model_validate_json(record_path.read_text())
        if record.source == str(src):
            return out, record.fixes
        raise BuildError(f"{out}: made from {record.source}, not {src}; remove the folder or choose another")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(src))
    if not tokenizer.chat_template:
        raise BuildError(f"{src}: the tokenizer has no chat template, so no template tokens to check")
    model = AutoModelForCausalLM.from_pretrained(str(src), dtype="auto")
    rows = [model.get_input_embeddings().weight]
    output = model.get_output_embeddings()
    if output is not None and output.weight.data_ptr() != rows[0].data_ptr():
        rows.append(output.weight)
    with torch.no_grad():
        fixes = find_fixes(tokenizer, tokenizer.chat_template, rows)
    if not fixes:
        return src, []
    apply_fixes(tokenizer, fixes, rows)
    _write(src, out, model, DistinctRecord(source=str(src), fixes=fixes))
    return out, fixes


def _write(src: Path, out: Path, model, record: DistinctRecord) -> None:
    """The tokenizer and other files as they are, the weights changed, the record last (its
    presence means the folder is complete)."""
    out.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and not f.name.endswith(WEIGHT_SUFFIXES) and f.name != RECORD:
            shutil.copy2(f, out / f.name)
    model.save_pretrained(str(out))
    (out / RECORD).write_text(json.dumps(record.model_dump(), indent=2) + "\n")
