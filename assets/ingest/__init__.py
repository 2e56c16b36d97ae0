"""Ingest: the model index from the Hugging Face Hub and the models sized from it."""
