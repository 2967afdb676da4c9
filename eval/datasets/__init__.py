"""Dataset readers: FLORES-200, ACL 60/60, ASR partial streams."""
