"""The `tessera` command: one console script, a subcommand per component and user task.

The composition root: the only package that may import every component. Each subcommand is a
module `cli/<name>.py` with `add_arguments(parser)` and `run(args) -> int`, imported only when
that subcommand runs so `tessera --help` stays fast.

A component's command (apiserver, agent, runtime-proxy, scheduler, controller) is thin and the
same in each: `settings_from(args)` turns the flags into the component's validated settings
dataclass, and `run(args)` is `<component>.run(settings_from(args))`, the one `run(settings) ->
int` its package exports. Flags that cannot work raise ConfigError, which `cli.main` prints as
`tessera CMD: reason` with exit code 2, before anything starts.
"""
