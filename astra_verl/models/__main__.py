import sys

from astra_verl.models.cli import main

sys.exit(main())
