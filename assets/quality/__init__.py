"""Quality: our figures against published measurements, logs, sizes and counts."""
