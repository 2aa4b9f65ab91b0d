import sys

try:
    from astra_verl.models.cli import main
except KeyboardInterrupt:  # Ctrl-C while Python loads the command: one line and 130, as run_cli answers
    print("\ninterrupted", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
