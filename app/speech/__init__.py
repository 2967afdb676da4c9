"""Speech in: a streaming Whisper recogniser (faster-whisper) and its weights."""
