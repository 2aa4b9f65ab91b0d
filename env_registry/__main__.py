"""`python -m env_registry`: see `env_registry.cli`."""

import os
import sys

from env_registry.cli import main

try:
    sys.exit(main())
except BrokenPipeError:  # `... | head`: stop quietly, like other command-line tools
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(1)
