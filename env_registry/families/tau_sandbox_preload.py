"""Imported by each sandbox worker before it forks sessions (`astra.sandbox.preload`): loads
τ-bench's domain databases once per worker, so sessions only copy them (`tau_sandbox`).

Sandbox-only: in the host it would register τ-bench's packages without their `__init__`s, so
tests/import_check.py leaves it out.
"""

from env_registry.families.tau_sandbox import DOMAINS, database

for _domain in DOMAINS:
    database(_domain)
