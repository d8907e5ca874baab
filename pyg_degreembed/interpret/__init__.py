r"""Interpretation: learned and applied rules, per-prediction explanations,
saturation, AnyBURL's rule format and plots."""
