"""`python -m env_registry`: see `env_registry.cli`."""

import os
import sys

try:
    from env_registry.cli import main
except KeyboardInterrupt:  # Ctrl-C while Python loads the command: one line and 130, as run_cli answers
    print("\ninterrupted", file=sys.stderr)
    sys.exit(130)

try:
    sys.exit(main())
except BrokenPipeError:  # `... | head`: stop quietly, like other command-line tools
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(1)
