"""The model catalog (drafters.toml), the local model library, GGUF metadata and drafter pairing.

Pure Python: no Qt, no llama.cpp. May import only localchat.settings, the
standard library and third-party packages.
"""
