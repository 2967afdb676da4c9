"""Live captions: one speaker's WebSocket (reader, fan-out, per-language pipelines, publisher,
audio input), from an ASR stream or speech to caption frames."""
