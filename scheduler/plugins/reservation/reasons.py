"""Rejection reasons of the Reservation plugin."""

#: A pod with a `reservation-affinity` annotation, and no Available Reservation it may use
#: (Koordinator's ErrReasonReservationAffinity; the counts of why each was not follow it).
NO_MATCHING_RESERVATION = "node(s) no reservations match reservation affinity"
#: A Reservation labelled `pre-allocation-required` with no running pod to be placed over
#: (Koordinator's ErrReasonReservationPreAllocationRequired).
PRE_ALLOCATION_REQUIRED = "node(s) no pod match reservation with pre allocation required"
