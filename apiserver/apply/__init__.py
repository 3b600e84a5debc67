"""Server-side apply (`PATCH` with `application/apply-patch+yaml`): field managers and conflicts.

`fields` turns an object into the set of field paths it sets and back into kube's `fieldsV1`;
`merge` merges an applied configuration into the live object, drops what the manager applied
before and no longer does, and finds conflicts with other managers; `server` runs one apply
request against the registry.
"""
