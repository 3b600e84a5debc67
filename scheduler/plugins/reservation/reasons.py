"""Rejection reasons of the Reservation plugin."""

#: A pod with a `reservation-affinity` annotation, and no Available Reservation it may use.
NO_MATCHING_RESERVATION = "no Available Reservation matches the pod's owners and reservation-affinity"
