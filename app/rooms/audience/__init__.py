"""Audience links and their QR codes: how the audience reaches a room's caption screen.

The feature in one place, so a change to it reads one folder:

- ``links.py``: the server's public base, the viewer link of one language of a room and
  its QR code as SVG (no HTTP: the settings check ``--public-url`` with it, and the room
  viewer-token routes answer links with it);
- ``route.py``: ``GET /v1/rooms/{room}/qr``, the printable page and its script. It sits
  in the API layer (server state, viewer access, the OpenAI shape of errors), so nothing
  here imports it: the server mounts it (tests/test_import_layers.py).
"""
