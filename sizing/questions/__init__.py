"""The questions people ask, answered with the formulas: one estimate and its typed
result, recommendations, rankings, capacity plans, what runs on a GPU."""
