"""The `tessera` command: one console script, a subcommand per component and user task.

The composition root: the only package that may import every component. Each subcommand is a
module `cli/<name>.py` with `add_arguments(parser)` and `run(args) -> int`, imported only when
that subcommand runs so `tessera --help` stays fast.
"""
