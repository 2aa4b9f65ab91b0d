"""astra-verl: ASTRA's multi-turn tool RL as a verl plugin.

Importing this package is cheap and imports no verl module; `import verl` loads
`astra_verl.plugin` through the `verl.plugins` entry point, which registers our agent loops,
reward managers and platform.
"""

__version__ = "0.1.0"
