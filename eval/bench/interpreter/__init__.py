"""Realtime translation of a talk (``livetrans bench interpreter``)."""
