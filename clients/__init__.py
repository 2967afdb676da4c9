"""Clients: the live-caption terminal client and examples."""
