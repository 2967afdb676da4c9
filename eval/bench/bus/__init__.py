"""Rooms on Redis across two replicas (``livetrans bench bus``)."""
