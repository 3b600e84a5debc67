"""Custom resources held to their CRD's structural schema, as kube-apiserver holds them.

`structural` compiles a CRD's `openAPIV3Schema`; `prune` drops unknown fields and fills defaults;
`validate` reports every bad field as kube's 422 causes; `strategy` plugs these into the
registry's write path; `fieldvalidation` is the request's `fieldValidation` mode; `openapi`
publishes the schemas at `/openapi/v2` and `/openapi/v3` for `kubectl explain`.
"""
