"""Rooms: a talk's whole life (registry, ownership on the room bus, publishing to viewers on any
replica, the end) and its transcripts."""
