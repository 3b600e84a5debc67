"""Objects held to their schema, as kube-apiserver holds them.

`structural` compiles a CRD's `openAPIV3Schema` (or, through `$ref`s, a built-in kind's
Kubernetes definition: `builtin`, from `builtin.json`); `prune` drops unknown fields and fills
defaults; `validate` reports every bad field of a custom resource as kube's 422 causes;
`strategy` plugs these into the registry's write path (custom resources: prune, default,
validate; built-in kinds: prune and check every field's JSON type in the same walk, as kube's
decoding into Go types does: `gotypes`); `fieldvalidation` is the request's `fieldValidation` mode;
`openapi` publishes every served kind's schema at `/openapi/v2` and `/openapi/v3` for `kubectl
explain`.
"""
