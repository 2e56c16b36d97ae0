"""The formulas as Polars expressions over the column protocol: memory, speed, energy,
cost, the rules of what can run, and the grid the matrix evaluates them on."""
