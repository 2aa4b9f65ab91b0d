import sys

from astra_verl.eval.cli import main

sys.exit(main())
