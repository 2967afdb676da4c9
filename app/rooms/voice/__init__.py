"""A room's voice: the talk's committed translation spoken per language and carried to
listeners as HLS audio renditions (docs/room-voice.md): ``aac`` encodes, ``track`` lays
the speech on the talk's clock and cuts it into segments, ``segments`` keeps them where
every replica reads them, ``playlist`` writes what a player fetches, and ``route`` serves
it (``GET /v1/rooms/{room}/voice/...``; in the API layer, so nothing here imports it: the
server mounts it, tests/test_import_layers.py)."""
