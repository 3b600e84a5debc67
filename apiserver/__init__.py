"""The embedded Kubernetes API server: the REST API Tessera uses, served from one process.

Run it with `tessera apiserver`; tests and `tessera up` start it through
`cli.launchers.apiserver.run_apiserver`. What it implements (and what not) is in
docs/user/apiserver.md. Modules, bottom up: `storage` (SQLite) → `registry` (objects and write
semantics, with `strategy`/`pods`/`crds`) → `watch` (event log) → `handlers` (HTTP, with
`routing`, `bodies`, `selectors`, `patch`, `tables`, `discovery`) → `server` (assembly).
"""

from apiserver.handlers import WatchSettings
from apiserver.server import APIServerSettings, new_token, run, serve

__all__ = ["APIServerSettings", "WatchSettings", "new_token", "run", "serve"]
