"""Draft sources for speculative decoding: each proposes tokens the model then verifies."""
