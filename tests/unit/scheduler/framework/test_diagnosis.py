"""The one-line summary kube-scheduler users read in events and conditions."""

from scheduler.framework import Diagnosis, Status


def test_a_prefilter_reason_that_ends_a_sentence_gets_one_period() -> None:
    nested = Status.unresolvable(
        "gang ns/big: member ns/w-1 unschedulable: 0/3 nodes are available: 3 Insufficient gpu."
    )
    assert Diagnosis(pre_filter_status=nested).summary(3) == (
        "0/3 nodes are available: gang ns/big: member ns/w-1 unschedulable: "
        "0/3 nodes are available: 3 Insufficient gpu."
    )
    plain = Status.unresolvable("invalid device request")
    assert Diagnosis(pre_filter_status=plain).summary(2) == "0/2 nodes are available: invalid device request."
