"""Voices: translated text spoken aloud (Piper, espeak-ng, Kokoro), behind one seam."""
