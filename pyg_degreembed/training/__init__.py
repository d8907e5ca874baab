r"""Training: the fit loop, checkpoints, safe files and locks, memory budgets,
threads, torch.distributed and progress."""
