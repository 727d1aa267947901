"""Checkpoint -> other frameworks. hf: a HuggingFace `transformers` folder (numpy + safetensors)."""
