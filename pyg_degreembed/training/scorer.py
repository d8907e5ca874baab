r"""What ranks the answers after training: the trained model's own score,
or the applied rules (:class:`~pyg_degreembed.AppliedRules`) mined from the
training graph with the model as tie-break, the better on validation."""
import math
import time
from typing import Any, NamedTuple, Optional

from torch.nn import Module

from pyg_degreembed.data.convert import as_kg
from pyg_degreembed.evaluation.ranks import compute_ranks
from pyg_degreembed.interpret.applied_rules import AppliedRules


class ScorerChoice(NamedTuple):
    r"""The outcome of :func:`choose_scorer`."""
    #: The module that ranks: the model or :obj:`applied`.
    scorer: Module
    #: :obj:`"rules"` or :obj:`"model"`.
    name: str
    #: Why, in words (the two validation MRRs).
    reason: str
    #: The mined rules.
    applied: AppliedRules
    #: Seconds the mining took.
    mining_seconds: float


def choose_scorer(model: Module, data: Any, num_steps: int,
                  model_valid_mrr: float, scorer: str = 'auto',
                  device: Optional[Any] = None) -> ScorerChoice:
    r"""Mines the applied rules of length at most :obj:`num_steps` with
    :obj:`model` as tie-break and chooses the scorer: :obj:`scorer="auto"`
    takes the rules where their filtered validation MRR (realistic ties) is
    at least :obj:`model_valid_mrr` (the model's, as :func:`fit` measured
    it; measured here where it is not a number, e.g. when training ended
    before its first validation) or where the KG has no validation triples;
    :obj:`"rules"` takes the rules.

    Args:
        model (torch.nn.Module): The trained model.
        data: The KG, in any layout :func:`~pyg_degreembed.as_kg` reads.
        num_steps (int): The longest rule :math:`L`.
        model_valid_mrr (float): The model's validation MRR.
        scorer (str, optional): :obj:`"auto"` or :obj:`"rules"`.
            (default: :obj:`"auto"`)
        device (torch.device, optional): Where the rules rank. (default:
            the model's device)
    """
    if scorer not in ('auto', 'rules'):
        raise ValueError(f"'scorer' must be 'auto' or 'rules', got "
                         f'{scorer!r}')
    if device is None:
        device = next(model.parameters()).device
    start = time.perf_counter()
    applied = AppliedRules.mine(data, num_steps, tie_break=model).to(device)
    seconds = time.perf_counter() - start
    if scorer == 'rules':
        name, reason = 'rules', 'asked for'
    elif as_kg(data).valid_edge_type.numel() == 0:
        name, reason = 'rules', 'no validation triples to choose on'
    else:
        if not math.isfinite(model_valid_mrr):
            model_valid_mrr = compute_ranks(model, data,
                                            'valid').metrics()['mrr']
        valid = compute_ranks(applied, data, 'valid').metrics()['mrr']
        name = 'rules' if valid >= model_valid_mrr else 'model'
        reason = (f'validation MRR: applied rules {valid:.4f}, model '
                  f'{model_valid_mrr:.4f}')
    return ScorerChoice(applied if name == 'rules' else model, name, reason,
                        applied, seconds)


__all__ = ['ScorerChoice', 'choose_scorer']
