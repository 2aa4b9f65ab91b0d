import sys

from astra_verl.inspect.cli import main

sys.exit(main())
