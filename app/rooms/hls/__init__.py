"""A room's talk as HLS subtitle renditions: live WebVTT playlists per language, for a
player beside the organiser's own video stream (docs/captions-out-hls.md).

The feature in one place, so a change to it reads one folder:

- ``timeline.py``: pure timing: which cues a segment holds, when it is published (never to
  change after), which segments a live or an ended playlist lists;
- ``playlist.py``: the text a player fetches: the media playlist, the WebVTT segments and
  their timestamp map onto the video's clock (the room voice's segments share that clock);
- ``source.py``: where it comes from, the same on every replica: the talk, whether it runs,
  its cues from the transcript store, how far its live playlists reached, caches;
- ``route.py``: ``GET /v1/rooms/{room}/hls/...``, and the access, talk and offset rules
  every rendition of a room shares (the voice's, ``app.rooms.voice.route``, and its WebRTC
  listeners'). It sits in the API layer (the server state, the OpenAI shape of errors), so
  nothing here imports it: the server mounts it (tests/test_import_layers.py).
"""
