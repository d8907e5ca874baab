r"""Filtered ranking with explicit tie handling.

A rule learner gives exactly the same score (often 0) to many entities, so how
ties are broken changes the metrics a lot.  For the target score :math:`s_t`
and the filtered candidates (every other known true answer removed):

* optimistic rank: :math:`1 + |\{i : s_i > s_t\}|`
* pessimistic rank: :math:`1 + |\{i \neq t : s_i \geq s_t\}|`
* realistic rank: the mean of the two, i.e. the expected rank under a random
  order of the tied entities (the default).

The DegreEmbed paper reports optimistic ranks.
"""
from typing import (Any, Callable, Dict, List, NamedTuple, Optional,
                    Sequence, Union)

import torch
from torch import Tensor
from torch.nn import Module

from .convert import as_kg
from .distributed import gather_strided, world
from .kg import all_triples, split_triples
from .progress import Progress
from .ragged import ragged_arange
from .resolve import resolve_graph
from .typed_graph import TypedGraph

TIE_POLICIES = ('optimistic', 'pessimistic', 'realistic')
HITS_AT = (1, 3, 10)


def both_directions(triples: Tensor, num_relations: int):
    r"""Turns triples :obj:`[3, n]` into :math:`2n` queries: the tail query
    :math:`(h, r, ?) \to t` and the head query :math:`(t, r + R, ?) \to h`.

    :rtype: (head, relation, answer), each of shape :obj:`[2n]`
    """
    h, r, t = triples
    return (torch.cat([h, t]), torch.cat([r, r + num_relations]),
            torch.cat([t, h]))


class TrueAnswers:
    r"""All known true answers of every query :math:`(h, q, ?)`, for the
    filtered setting, stored as sorted keys (no dense :math:`N \times N`
    mask).

    Args:
        triples (torch.Tensor): All known true triples, shape :obj:`[3, n]`.
        num_nodes (int): The number of entities.
        num_relations (int): The number :math:`R` of relations.
    """
    def __init__(self, triples: Tensor, num_nodes: int, num_relations: int):
        self.num_nodes = num_nodes
        self.num_edge_types = 2 * num_relations
        head, relation, answer = both_directions(triples, num_relations)
        key = self._key(head, relation)
        key, perm = torch.sort(key * num_nodes + answer)
        self.query_keys = key // num_nodes
        self.answers = answer[perm]

    def _key(self, head: Tensor, relation: Tensor) -> Tensor:
        return head * self.num_edge_types + relation

    def to(self, device) -> 'TrueAnswers':
        out = TrueAnswers.__new__(TrueAnswers)
        out.__dict__.update(self.__dict__)
        out.query_keys = self.query_keys.to(device)
        out.answers = self.answers.to(device)
        return out

    def lookup(self, head: Tensor, relation: Tensor):
        r"""The true answers of a batch of queries, as pairs
        :obj:`(query index in the batch, answer entity)`."""
        key = self._key(head, relation)
        lo = torch.searchsorted(self.query_keys, key)
        hi = torch.searchsorted(self.query_keys, key, right=True)
        batch, position = ragged_arange(lo, hi - lo)
        return batch, self.answers[position]


def filtered_ranks(scores: Tensor, target: Tensor,
                   true_pairs: Optional[Sequence[Tensor]] = None
                   ) -> Dict[str, Tensor]:
    r"""Ranks of the targets among the filtered candidates under all three
    tie policies.

    Args:
        scores (torch.Tensor): Scores of shape :obj:`[B, N]`.
        target (torch.Tensor): The answer of each query, shape :obj:`[B]`.
        true_pairs (Tuple[torch.Tensor, torch.Tensor], optional): Known true
            answers :obj:`(query index, entity)` to filter out (the target
            itself may be among them). (default: :obj:`None`)

    :rtype: :obj:`Dict[str, torch.Tensor]` of float ranks :obj:`[B]` per tie
        policy.
    """
    if torch.isnan(scores).any():
        raise ValueError('The scores contain NaN; ranks would be arbitrary')
    target_score = scores.gather(1, target.view(-1, 1))
    # Filter the known true answers and the target itself: what is left are
    # the candidates the target competes with.
    rows = torch.arange(target.numel(), device=target.device)
    if true_pairs is not None:
        rows = torch.cat([rows, true_pairs[0]])
        target = torch.cat([target, true_pairs[1]])
    scores = scores.index_put((rows, target),
                              scores.new_tensor(float('-inf')))
    better = (scores > target_score).sum(dim=1)
    tied = (scores == target_score).sum(dim=1)
    optimistic = (1 + better).double()
    pessimistic = optimistic + tied
    return {
        'optimistic': optimistic,
        'pessimistic': pessimistic,
        'realistic': (optimistic + pessimistic) / 2,
    }


def rank_metrics(ranks: Tensor) -> Dict[str, float]:
    r"""MR, MRR and Hits@1/3/10 of a vector of ranks (for realistic ranks,
    as in PyKEEN: :math:`\mathrm{MRR} = \mathrm{mean}(1 / r)` and a hit at
    :math:`k` is :math:`r \leq k`)."""
    ranks = ranks.double()
    out = {
        'mrr': float((1. / ranks).mean()) if ranks.numel() else float('nan'),
        'mr': float(ranks.mean()) if ranks.numel() else float('nan'),
    }
    for k in HITS_AT:
        out[f'hits@{k}'] = float((ranks <= k).double().mean()) \
            if ranks.numel() else float('nan')
    out['num_queries'] = ranks.numel()
    return out


class Ranks(NamedTuple):
    r"""Ranks of evaluated queries under each tie policy, with the original
    relation :math:`r \in [0, R)` and direction (:obj:`0` tail query,
    :obj:`1` head query) of each query."""
    ranks: Dict[str, Tensor]
    relation: Tensor
    direction: Tensor

    def metrics(self, tie: str = 'realistic',
                relation_names: Optional[List[str]] = None) -> Dict:
        r"""Overall metrics, plus :obj:`"per_relation"` metrics keyed by
        relation name (both directions pooled)."""
        if tie not in TIE_POLICIES:
            raise ValueError(f"'tie' must be one of {TIE_POLICIES}, "
                             f"got {tie!r}")
        ranks = self.ranks[tie]
        out = rank_metrics(ranks)
        out['tie'] = tie
        per_relation = {}
        for r in torch.unique(self.relation).tolist():
            name = relation_names[r] if relation_names else str(r)
            per_relation[name] = rank_metrics(ranks[self.relation == r])
        out['per_relation'] = per_relation
        return out


def compute_ranks(model: Module, data: Any,
                  triples: Union[str, Tensor] = 'test',
                  true_answers: Optional[TrueAnswers] = None,
                  batch_size: int = 256, progress: bool = False) -> Ranks:
    r"""Filtered ranks of a model on triples of a KG, both directions pooled
    (all tail queries, then all head queries, in the order of the triples).

    In a :mod:`torch.distributed` job every process ranks a share of the
    triples and all processes receive all ranks.

    Args:
        model (torch.nn.Module): Maps :obj:`(graph, head, relation)` to
            scores :obj:`[B, N]` (a :class:`~pyg_degreembed.RuleReasoner`).
        data: The KG, in any layout :func:`~pyg_degreembed.as_kg` reads; the
            model reasons on its observed graph.
        triples (str or torch.Tensor, optional): A split name
            (:obj:`"valid"`, :obj:`"test"`, ...) or triples of shape
            :obj:`[3, n]`. (default: :obj:`"test"`)
        true_answers (TrueAnswers, optional): The known true triples to
            filter. (default: every split of :obj:`data`)
        batch_size (int, optional): Queries per batch. (default: :obj:`256`)
        progress (bool, optional): Report progress (a bar on a terminal,
            else a line every 30 s; see
            :class:`~pyg_degreembed.progress.Progress`).
            (default: :obj:`False`)
    """
    return _ranks(model, data, as_kg(data), triples, true_answers,
                  batch_size, progress)


def _ranks(model, data, kg, triples, true_answers, batch_size, progress):
    # compute_ranks with the KG already read (the graph is looked up from
    # `data`, whose tensors key the cache).
    parameter = next(model.parameters(), None)
    graph = resolve_graph(data, num_relations=kg.num_relations,
                          device=None if parameter is None else
                          parameter.device)
    if isinstance(triples, str):
        triples = split_triples(kg, triples)
    if true_answers is None:
        true_answers = TrueAnswers(all_triples(kg), kg.num_nodes,
                                   kg.num_relations)
    return rank_queries(
        model, graph, triples, true_answers, batch_size,
        progress=lambda total: Progress(total, 'evaluating',
                                        enabled=progress))


@torch.no_grad()
def rank_queries(model: Module, graph: TypedGraph, triples: Tensor,
                 true_answers: TrueAnswers, batch_size: int = 256,
                 progress: Optional[Callable[[int], Progress]] = None
                 ) -> Ranks:
    r""":func:`compute_ranks` on a prepared graph (the inner loop, as used
    by :func:`~pyg_degreembed.fit` for validation).

    Args:
        model (torch.nn.Module): Maps :obj:`(graph, head, relation)` to
            scores :obj:`[B, N]`.
        graph (TypedGraph): The observed graph (no valid/test edges).
        triples (torch.Tensor): Triples to evaluate, shape :obj:`[3, n]`.
        true_answers (TrueAnswers): All known true triples, for filtering.
        batch_size (int, optional): Queries per batch. (default: :obj:`256`)
        progress (callable, optional): Makes the
            :class:`~pyg_degreembed.progress.Progress` of a given number of
            batches. (default: :obj:`None`, silent)
    """
    num_processes, process = world()
    local = _local_ranks(model, graph, triples[:, process::num_processes],
                         true_answers, batch_size, progress)
    if num_processes > 1:
        parts = [None] * num_processes
        torch.distributed.all_gather_object(parts, local)
        # Each part holds [tail queries; head queries] of its triples.
        local = {
            tie: torch.cat([
                gather_strided([p[tie].view(2, -1)[d] for p in parts],
                               num_processes) for d in range(2)
            ]) for tie in TIE_POLICIES
        }
    n = triples.size(1)
    return Ranks(local, relation=torch.cat([triples[1], triples[1]]).cpu(),
                 direction=torch.cat([torch.zeros(n), torch.ones(n)]).long())


def _local_ranks(model, graph, triples, true_answers, batch_size,
                 progress=None):
    R = true_answers.num_edge_types // 2
    device = graph.device
    head, relation, answer = (t.to(device)
                              for t in both_directions(triples, R))
    true_answers = true_answers.to(device)
    was_training = model.training
    model.eval()
    parts: Dict[str, List[Tensor]] = {tie: [] for tie in TIE_POLICIES}
    starts = range(0, head.numel(), batch_size)
    report = progress(len(starts)) if progress is not None else None
    for start in starts:
        h = head[start:start + batch_size]
        q = relation[start:start + batch_size]
        t = answer[start:start + batch_size]
        scores = model(graph, h, q)
        ranks = filtered_ranks(scores, t, true_answers.lookup(h, q))
        for tie in TIE_POLICIES:
            parts[tie].append(ranks[tie].cpu())
        if report is not None:
            report.update(h.numel())
    if report is not None:
        report.close()
    model.train(was_training)
    return {tie: torch.cat(v) if v else torch.empty(0, dtype=torch.double)
            for tie, v in parts.items()}


def evaluate(model: Module, data: Any, split: Union[str, Tensor] = 'test',
             tie: str = 'realistic', batch_size: int = 256) -> Dict:
    r"""Filtered MR, MRR and Hits@1/3/10 of a model on a split of a KG (or
    given triples), both directions pooled, overall and per relation named
    by the KG's :obj:`relation_names` (see :func:`compute_ranks` and
    :meth:`Ranks.metrics`)."""
    kg = as_kg(data)
    return _ranks(model, data, kg, split, None, batch_size,
                  False).metrics(tie, list(kg.relation_names))


__all__ = ['TrueAnswers', 'filtered_ranks', 'rank_metrics', 'compute_ranks',
           'rank_queries', 'evaluate', 'Ranks', 'both_directions']
