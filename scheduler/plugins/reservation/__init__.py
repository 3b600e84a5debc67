"""Reservation: places a Reservation's owners onto the resources it holds for them."""

from scheduler.plugins.reservation.plugin import DEFAULT_WEIGHT, NAME, ReservationPlugin, new

__all__ = ["DEFAULT_WEIGHT", "NAME", "ReservationPlugin", "new"]
