"""Tessera's custom resources (Koordinator's CRDs): Device, ElasticQuota and PodGroup, each parsed,
validated and serialized by its module."""
