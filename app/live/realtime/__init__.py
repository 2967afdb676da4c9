"""OpenAI's Realtime Translation protocol (``WebSocket /v1/realtime/translations``).

An adapter, not a second pipeline: the session (``session``) speaks the protocol's events
(``events``), frames the client's 24 kHz audio (``audio_buffer``) and drives ordinary
``/v1/live`` audio connections (``legs``) through a socket with no network behind it, so
admission, the recogniser, translation and the commit policy are the live subsystem's.
What those connections say back becomes the protocol's deltas (``transcripts``).
"""
