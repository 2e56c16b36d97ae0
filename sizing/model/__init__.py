"""What a model is: its architecture from its config, its tensors and their bytes per weight
format (imports only the engines, units and each other)."""
