"""`python -m env_registry`: see `env_registry.cli`."""

import sys

from env_registry.cli import main

sys.exit(main())
