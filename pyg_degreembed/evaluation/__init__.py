r"""Evaluation: filtered ranks with tie policies (typed where node types are
known) and top-k answers."""
