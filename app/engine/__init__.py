"""llama.cpp engine: prefix-cached evaluation, batched draft verification, KV truncation."""
