"""Kubernetes' own shapes as Tessera reads them: Pod and Node views, ObjectMeta, label selectors,
quantities and resource lists in base units."""
