"""The commands of `python -m env_registry`, one module per subcommand (or per related few); the
parser (`env_registry.cli`) imports none of them, so `--help` answers at once. Each command's
module is imported when it runs."""
