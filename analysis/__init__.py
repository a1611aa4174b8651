"""Results of the reproduction: parse -> tidy table -> figures, cost models, findings report."""
