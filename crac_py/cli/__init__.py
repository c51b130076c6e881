"""The `crac` command line: the typer application (main.py), `crac command` (command.py, which
skips typer), `crac doctor`, and rich progress bars. Imported lazily: `crac launch` pays only for
what a launch needs."""
