"""Which quota updates rebuild the tree: spec and labels do; the controller's own writes do not."""

from __future__ import annotations

import dataclasses

from apis.extension import names
from controller.quotas.feed import spec_changed
from tests.support.builders import quota_cr

GPU = names.GPU_CORE


def test_own_writes_do_not_count_as_a_spec_change() -> None:
    before = quota_cr("a", min={GPU: 100}, max={GPU: 200}, annotations={names.ANNOTATION_QUOTA_NAMESPACES: '["x"]'})
    meta = dataclasses.replace(
        before.meta, annotations={**before.meta.annotations, names.ANNOTATION_QUOTA_RUNTIME: '{"x":"1"}'}
    )
    after = dataclasses.replace(before, meta=meta, used={GPU: 100})
    assert not spec_changed(before, after)


def test_min_max_labels_and_other_annotations_do() -> None:
    before = quota_cr("a", min={GPU: 100}, max={GPU: 200})
    assert spec_changed(before, dataclasses.replace(before, max={GPU: 300}))
    relabelled = dataclasses.replace(before.meta, labels={names.LABEL_QUOTA_PARENT: "p"})
    assert spec_changed(before, dataclasses.replace(before, meta=relabelled))
    weighted = dataclasses.replace(before.meta, annotations={names.ANNOTATION_QUOTA_SHARED_WEIGHT: '{"x":"1"}'})
    assert spec_changed(before, dataclasses.replace(before, meta=weighted))
