r"""Filtered ranking with explicit tie handling.

A rule learner gives exactly the same score (often 0) to many entities, so how
ties are broken changes the metrics a lot.  For the target score :math:`s_t`
and the filtered candidates (every other known true answer removed):

* optimistic rank: :math:`1 + |\{i : s_i > s_t\}|`
* pessimistic rank: :math:`1 + |\{i \neq t : s_i \geq s_t\}|`
* realistic rank: the mean of the two, i.e. the expected rank under a random
  order of the tied entities (the default).

The DegreEmbed paper reports optimistic ranks.

Besides MRR and Hits@k over all entities, :meth:`Ranks.metrics` reports
GraIL's inductive protocol, Hits@10 among 50 candidates (the true answer and
49 non-answers drawn at random), as its *expected* value, computed in closed
form from each query's counts of better, tied and all non-answers
(:func:`sampled_hits`), so it carries no sampling noise.
"""
import inspect
import math
from typing import (Any, Callable, Dict, List, NamedTuple, Optional, Sequence,
                    Tuple, Union)

import torch
from torch import Tensor
from torch.nn import Module

from pyg_degreembed.data.convert import as_kg
from pyg_degreembed.data.kg import (GRAPH_SPLITS, all_triples, answer_types,
                                    split_triples)
from pyg_degreembed.data.ragged import ragged_arange
from pyg_degreembed.data.resolve import resolve_graph
from pyg_degreembed.data.typed_graph import TypedGraph
from pyg_degreembed.evaluation.candidates import draw_candidates
from pyg_degreembed.training.budget import ranking_batch, resident_peak
from pyg_degreembed.training.distributed import gather_strided, world
from pyg_degreembed.training.progress import Progress

TIE_POLICIES = ('optimistic', 'pessimistic', 'realistic')
HITS_AT = (1, 3, 10)
#: The key of GraIL's Hits@10 among 50 candidates in :meth:`Ranks.metrics`.
SAMPLED = 'hits@10(50)'
#: What :func:`filtered_ranks` returns per query.
KEYS = TIE_POLICIES + ('candidates', )


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


def _candidates(shape: Sequence[int], target: Tensor,
                true_pairs: Optional[Sequence[Tensor]],
                allowed: Optional[Tensor]) -> Tensor:
    # The filtered candidates [B, N] of filtered_ranks: the entities
    # allowed, less the known true answers and the target itself (what is
    # left are the candidates the target competes with).
    rows = torch.arange(target.numel(), device=target.device)
    if true_pairs is not None:
        rows = torch.cat([rows, true_pairs[0]])
        target = torch.cat([target, true_pairs[1]])
    candidate = torch.ones(shape, dtype=torch.bool, device=target.device) \
        if allowed is None else allowed.clone()
    return candidate.index_put((rows, target),
                               torch.tensor(False, device=target.device))


def filtered_ranks(scores: Tensor, target: Tensor,
                   true_pairs: Optional[Sequence[Tensor]] = None,
                   allowed: Optional[Tensor] = None,
                   sample: Optional[Tuple[int, Tensor, int]] = None
                   ) -> Dict[str, Tensor]:
    r"""Ranks of the targets among the filtered candidates under all three
    tie policies.

    Args:
        scores (torch.Tensor): Scores of shape :obj:`[B, N]`.
        target (torch.Tensor): The answer of each query, shape :obj:`[B]`.
        true_pairs (Tuple[torch.Tensor, torch.Tensor], optional): Known true
            answers :obj:`(query index, entity)` to filter out (the target
            itself may be among them). (default: :obj:`None`)
        allowed (torch.Tensor, optional): The entities each query may
            rank at all, a boolean mask :obj:`[B, N]` (typed ranking: the
            entities of the answer's node type). (default: :obj:`None`,
            every entity)
        sample (Tuple[int, torch.Tensor, int], optional): Sampled
            candidates :obj:`(n, query, seed)`: each target ranked against
            :math:`n` of its filtered candidates drawn by
            :func:`~pyg_degreembed.evaluation.candidates.draw_candidates`
            (:obj:`query`: each row's index among all evaluated queries,
            :obj:`[B]`). (default: :obj:`None`, all of them)

    :rtype: :obj:`Dict[str, torch.Tensor]` of float ranks :obj:`[B]` per tie
        policy, and under :obj:`"candidates"` the number of candidates
        (entities other than the target and the known answers; with
        :obj:`sample`, those drawn).
    """
    if torch.isnan(scores).any():
        raise ValueError('The scores contain NaN; ranks would be arbitrary')
    target_score = scores.gather(1, target.view(-1, 1))
    candidate = _candidates(scores.shape, target, true_pairs, allowed)
    if sample is not None:
        ids, candidate = draw_candidates(candidate, sample[1], sample[0],
                                         sample[2])
        scores = scores.gather(1, ids)
    # Counted in int32: half the time of the default int64 sums.
    better = ((scores > target_score) & candidate).sum(dim=1,
                                                       dtype=torch.int32)
    tied = ((scores == target_score) & candidate).sum(dim=1,
                                                      dtype=torch.int32)
    optimistic = (1 + better).double()
    pessimistic = optimistic + tied
    return {
        'optimistic': optimistic,
        'pessimistic': pessimistic,
        'realistic': (optimistic + pessimistic) / 2,
        'candidates': candidate.sum(dim=1, dtype=torch.int32).long(),
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


def sampled_hits(better: Tensor, tied: Tensor, candidates: Tensor,
                 k: int = 10, num_negatives: int = 49,
                 tie: str = 'realistic') -> Tensor:
    r"""The expected Hits@k of each query when its answer is ranked among
    itself and :obj:`num_negatives` non-answers drawn uniformly without
    replacement (GraIL's protocol: Hits@10 among 50), in closed form.

    Of the :math:`n` candidates, :math:`g` score above the answer, :math:`e`
    the same, :math:`w = n - g - e` below; a draw of :math:`m = \min(49, n)`
    holds :math:`b` better and :math:`c` tied ones with the multivariate
    hypergeometric probability

    .. math::
        P(b, c) = \binom{g}{b} \binom{e}{c} \binom{w}{m - b - c} \Big/
        \binom{n}{m},

    and the answer is a hit if :math:`b \leq k - 1` (optimistic ties),
    :math:`b + c \leq k - 1` (pessimistic), or, with the ties in random
    order (realistic), with probability
    :math:`\min(c + 1, \max(k - b, 0)) / (c + 1)`.

    Args:
        better (torch.Tensor): :math:`g` per query, shape :obj:`[Q]`.
        tied (torch.Tensor): :math:`e` per query, shape :obj:`[Q]`.
        candidates (torch.Tensor): :math:`n` per query, shape :obj:`[Q]`.
        k (int, optional): The cut-off. (default: :obj:`10`)
        num_negatives (int, optional): Non-answers drawn. (default:
            :obj:`49`)
        tie (str, optional): The tie policy. (default: :obj:`"realistic"`)

    :rtype: :class:`torch.Tensor` of shape :obj:`[Q]` (float64)
    """
    if tie not in TIE_POLICIES:
        raise ValueError(f"'tie' must be one of {TIE_POLICIES}, got {tie!r}")
    g, e, n = (x.double().view(-1, 1, 1) for x in (better, tied, candidates))
    w = n - g - e
    m = torch.clamp(n, max=num_negatives)
    b = torch.arange(k, dtype=torch.double).view(1, -1, 1)
    c = torch.arange(num_negatives + 1, dtype=torch.double).view(1, 1, -1)
    log_p = (_log_binomial(g, b) + _log_binomial(e, c) +
             _log_binomial(w, m - b - c) - _log_binomial(n, m))
    if tie == 'optimistic':
        hit = torch.ones_like(b + c)
    elif tie == 'pessimistic':
        hit = (b + c <= k - 1).double()
    else:
        hit = torch.minimum(c + 1, k - b) / (c + 1)
    return (log_p.exp() * hit).sum(dim=(1, 2))


def _log_binomial(n: Tensor, k: Tensor) -> Tensor:
    # log C(n, k), -inf outside 0 <= k <= n.
    valid = (k >= 0) & (k <= n)
    n, k = torch.broadcast_tensors(n, k)
    k = torch.where(valid, k, torch.zeros_like(k))
    value = (torch.lgamma(n + 1) - torch.lgamma(k + 1) -
             torch.lgamma(n - k + 1))
    return torch.where(valid, value, torch.full_like(value, -math.inf))


class Ranks(NamedTuple):
    r"""Ranks of evaluated queries under each tie policy, with the original
    relation :math:`r \in [0, R)` and direction (:obj:`0` tail query,
    :obj:`1` head query) of each query, and the number of candidates each
    answer competed with (for :func:`sampled_hits`)."""
    ranks: Dict[str, Tensor]
    relation: Tensor
    direction: Tensor
    candidates: Optional[Tensor] = None
    #: Whether the candidates were the entities of the answer's node type.
    typed: bool = False
    #: Sampled candidates: each answer ranked against this many drawn
    #: filtered candidates (:mod:`~pyg_degreembed.evaluation.candidates`);
    #: :obj:`None`, against all of them.
    num_candidates: Optional[int] = None

    def mrr(self, tie: str = 'realistic') -> float:
        r"""The MRR alone (that of :meth:`metrics`, without the other
        metrics: those among sampled candidates cost more)."""
        if tie not in TIE_POLICIES:
            raise ValueError(f"'tie' must be one of {TIE_POLICIES}, "
                             f"got {tie!r}")
        return rank_metrics(self.ranks[tie])['mrr']

    def metrics(self, tie: str = 'realistic',
                relation_names: Optional[List[str]] = None) -> Dict:
        r"""Overall metrics (:obj:`"mrr"`, :obj:`"mr"`, :obj:`"hits@k"`
        and, where the candidates are known, :obj:`"hits@10(50)"`, see
        :func:`sampled_hits`), plus :obj:`"per_relation"` metrics keyed by
        relation name (both directions pooled) and, for sampled candidates,
        :obj:`"num_candidates"`."""
        if tie not in TIE_POLICIES:
            raise ValueError(f"'tie' must be one of {TIE_POLICIES}, "
                             f"got {tie!r}")
        ranks = self.ranks[tie]
        sampled = None
        if self.candidates is not None:
            better = self.ranks['optimistic'] - 1
            tied = self.ranks['pessimistic'] - self.ranks['optimistic']
            sampled = torch.cat([
                sampled_hits(better[i:i + 4096], tied[i:i + 4096],
                             self.candidates[i:i + 4096], tie=tie)
                for i in range(0, ranks.numel(), 4096)
            ]) if ranks.numel() else torch.empty(0, dtype=torch.double)

        def metrics(mask):
            out = rank_metrics(ranks[mask])
            if sampled is not None:
                out[SAMPLED] = float(sampled[mask].mean()) \
                    if sampled[mask].numel() else float('nan')
            return out

        out = metrics(torch.ones_like(self.relation, dtype=torch.bool))
        out['tie'] = tie
        if self.num_candidates is not None:
            out['num_candidates'] = self.num_candidates
        per_relation = {}
        for r in torch.unique(self.relation).tolist():
            name = relation_names[r] if relation_names else str(r)
            per_relation[name] = metrics(self.relation == r)
        out['per_relation'] = per_relation
        return out


def compute_ranks(model: Module, data: Any,
                  triples: Union[str, Tensor] = 'test',
                  true_answers: Optional[TrueAnswers] = None,
                  batch_size: int = 256, progress: bool = False,
                  remove_edge: Optional[bool] = None,
                  typed: bool = True, num_candidates: Optional[int] = None,
                  candidate_seed: int = 0) -> Union['Ranks', List['Ranks']]:
    r"""Filtered ranks of a model on triples of a KG, both directions pooled
    (all tail queries, then all head queries, in the order of the triples).
    Triples that are edges of the observed graph (the :obj:`"train"` and
    :obj:`"facts"` splits) are ranked as training scores them: each query
    without its own edge and that edge's inverse (else the edge itself would
    answer it), by models whose :obj:`forward` takes :obj:`remove_tail` (a
    :class:`~pyg_degreembed.RuleReasoner`).

    In a :mod:`torch.distributed` job every process ranks a share of the
    triples and all processes receive all ranks.

    Args:
        model (torch.nn.Module): Maps :obj:`(graph, head, relation)` to
            scores :obj:`[B, N]` (a :class:`~pyg_degreembed.RuleReasoner`),
            each row a function of its head and relation only: every
            distinct query :math:`(h, r, ?)` is scored once, and all its
            answers are ranked on that row (about half the work on
            FB15k-237, whose test triples hold 22.9k distinct queries in
            40.9k).
        data: The KG, in any layout :func:`~pyg_degreembed.as_kg` reads; the
            model reasons on its observed graph.
        triples (str or torch.Tensor, optional): A split name
            (:obj:`"valid"`, :obj:`"test"`, ...) or triples of shape
            :obj:`[3, n]`. (default: :obj:`"test"`)
        true_answers (TrueAnswers, optional): The known true triples to
            filter. (default: every split of :obj:`data`)
        batch_size (int, optional): Queries per batch at most: on the CPU
            one query is ranked first and its measured peak memory sizes
            the batches to what fits
            (:func:`~pyg_degreembed.training.budget.ranking_batch`).
            (default: :obj:`256`)
        progress (bool, optional): Report progress (a bar on a terminal,
            else a line every 30 s; see
            :class:`~pyg_degreembed.training.progress.Progress`).
            (default: :obj:`False`)
        remove_edge (bool, optional): Leave each query's own edge out;
            :obj:`None` does so for the splits :obj:`"train"` and
            :obj:`"facts"` if the model can. (default: :obj:`None`)
        typed (bool, optional): In a KG with node types (built from a
            :obj:`HeteroData`), rank each answer among the entities of its
            node type only (:func:`~pyg_degreembed.data.kg.answer_types`); an
            untyped KG ranks among all entities either way.
            (default: :obj:`True`)
        num_candidates (int, optional): Sampled-candidate evaluation (the
            OGB protocol, for large KGs): each answer ranked against this
            many of its filtered candidates, drawn uniformly without
            replacement (:mod:`~pyg_degreembed.evaluation.candidates`).
            (default: :obj:`None`, all of them)
        candidate_seed (int, optional): The seed of that draw.
            (default: :obj:`0`)
    """
    return _ranks(model, data, as_kg(data), triples, true_answers,
                  batch_size, progress, remove_edge, typed, num_candidates,
                  candidate_seed)


def _ranks(model, data, kg, triples, true_answers, batch_size, progress,
           remove_edge=None, typed=True, num_candidates=None,
           candidate_seed=0):
    # compute_ranks with the KG already read (the graph is looked up from
    # `data`, whose tensors key the cache).
    can = 'remove_tail' in inspect.signature(model.forward).parameters
    if remove_edge is None:
        remove_edge = can and isinstance(triples, str) and \
            triples in GRAPH_SPLITS
    elif remove_edge and not can:
        raise ValueError(f"'remove_edge' needs a model whose forward takes "
                         f"'remove_tail'; {type(model).__name__}'s does not")
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
                                        enabled=progress),
        remove_edge=remove_edge, types=answer_types(kg) if typed else None,
        sample=None if num_candidates is None else (num_candidates,
                                                    candidate_seed))


@torch.no_grad()
def rank_queries(model: Module, graph: TypedGraph, triples: Tensor,
                 true_answers: TrueAnswers, batch_size: int = 256,
                 progress: Optional[Callable[[int], Progress]] = None,
                 remove_edge: bool = False,
                 types: Optional[Tuple[Tensor, Tensor]] = None,
                 sample: Optional[Tuple[int, int]] = None
                 ) -> Union['Ranks', List['Ranks']]:
    r""":func:`compute_ranks` on a prepared graph (the inner loop, as used
    by :func:`~pyg_degreembed.fit` for validation).

    Args:
        model (torch.nn.Module): Maps :obj:`(graph, head, relation)` to
            scores :obj:`[B, N]`, as in :func:`compute_ranks`.
        graph (TypedGraph): The observed graph (no valid/test edges).
        triples (torch.Tensor): Triples to evaluate, shape :obj:`[3, n]`.
        true_answers (TrueAnswers): All known true triples, for filtering.
        batch_size (int, optional): Queries per batch at most: on the CPU
            one query is ranked first and its measured peak memory sizes
            the batches to what fits
            (:func:`~pyg_degreembed.training.budget.ranking_batch`).
            (default: :obj:`256`)
        progress (callable, optional): Makes the
            :class:`~pyg_degreembed.training.progress.Progress` of a given
            number of
            batches. (default: :obj:`None`, silent)
        remove_edge (bool, optional): Score each query without its own edge
            and that edge's inverse (:obj:`model(..., remove_tail=answer)`),
            for triples that are edges of :obj:`graph`.
            (default: :obj:`False`)
        types (Tuple[torch.Tensor, torch.Tensor], optional): Typed
            ranking: the node type of each entity and of each query
            relation's answers (:func:`~pyg_degreembed.data.kg.answer_types`).
            (default: :obj:`None`, untyped)
        sample (Tuple[int, int], optional): Sampled candidates
            :obj:`(num_candidates, seed)`, see :func:`compute_ranks`.
            (default: :obj:`None`, all candidates)

    A model may score several rankings of the queries at once, scores of
    shape :obj:`[S, B, N]` (as
    :meth:`~pyg_degreembed.AppliedRules.score_with_unseen`): a list of
    :math:`S` :class:`Ranks` then.
    """
    num_processes, process = world()
    n = triples.size(1)
    # The queries' indices among all (tail queries, then head queries):
    # what keys their candidates' draw, whatever the process.
    mine = torch.arange(process, n, num_processes)
    parts, stacked = _local_ranks(
        model, graph, triples[:, process::num_processes], true_answers,
        batch_size, progress, remove_edge, types,
        None if sample is None else (sample[0], torch.cat([mine, n + mine]),
                                     sample[1]))
    if num_processes > 1:
        # A process without queries does not know how many rankings the
        # model scores: every process takes the largest count.
        counts: List[Any] = [None] * num_processes
        torch.distributed.all_gather_object(counts, (len(parts), stacked))
        stacked = any(s for _, s in counts)
        parts += [dict(parts[0]) for _ in range(
            max(c for c, _ in counts) - len(parts))]
    out = []
    for local in parts:
        if num_processes > 1:
            gathered: List[Any] = [None] * num_processes
            torch.distributed.all_gather_object(gathered, local)
            # Each part holds [tail queries; head queries] of its triples.
            local = {
                key: torch.cat([
                    gather_strided([p[key].view(2, -1)[d] for p in gathered],
                                   num_processes) for d in range(2)
                ]) for key in local
            }
        candidates = local.pop('candidates')
        out.append(Ranks(
            local, relation=torch.cat([triples[1], triples[1]]).cpu(),
            direction=torch.cat([torch.zeros(n), torch.ones(n)]).long(),
            candidates=candidates, typed=types is not None,
            num_candidates=None if sample is None else sample[0]))
    return out if stacked else out[0]


def _local_ranks(model, graph, triples, true_answers, batch_size,
                 progress, remove_edge, types=None, sample=None):
    K = true_answers.num_edge_types
    device = graph.device
    head, relation, answer = (t.to(device)
                              for t in both_directions(triples, K // 2))
    true_answers = true_answers.to(device)
    n = head.numel()
    if remove_edge:  # each query scored without its own edge
        query_of = torch.arange(n, device=device)
        query_head, query_relation = head, relation
    else:
        # The scores depend on the head and relation only: each distinct
        # query is scored once and all its answers ranked on that row.
        # Sorted by relation, so that a batch holds few relations (the
        # model's groups of one relation, see RuleReasoner.forward).
        N = true_answers.num_nodes
        key, query_of = torch.unique(relation * N + head,
                                     return_inverse=True)
        query_head = key % N
        query_relation = torch.div(key, N, rounding_mode='floor')
    members = torch.argsort(query_of, stable=True)
    ptr = torch.cat([query_of.new_zeros(1), torch.bincount(
        query_of, minlength=query_head.numel()).cumsum(0)]).tolist()
    was_training = model.training
    model.eval()
    # One dictionary of ranks per ranking; whether the model scores several.
    out, stacked = [], False

    def new_ranking():
        return {key: torch.empty(n, dtype=torch.long if key == 'candidates'
                                 else torch.double) for key in KEYS}

    # With sampled candidates, a model that can score only some entities
    # (AppliedRules) scores the drawn candidates and the answers.
    targeted = sample is not None and not remove_edge and \
        'targets' in inspect.signature(model.forward).parameters

    def filters(chunk):
        # The answers' typed mask, known answers and draw of their ranking.
        q = relation[chunk]
        allowed = None if types is None else \
            types[0].to(device) == types[1].to(device)[q].unsqueeze(1)
        return allowed, true_answers.lookup(head[chunk], q), None \
            if sample is None else (sample[0], sample[1][chunk.cpu()],
                                    sample[2])

    def rank_batch(start, stop):
        # Ranks the answers of the distinct queries [start, stop).
        nonlocal stacked
        h, q = query_head[start:stop], query_relation[start:stop]
        batch = members[ptr[start]:ptr[stop]]
        if remove_edge:
            scores = model(graph, h, q, remove_tail=answer[start:stop])
        elif targeted:
            targets = torch.zeros(stop - start, true_answers.num_nodes,
                                  dtype=torch.bool, device=device)
            for chunk in batch.split(batch_size):
                allowed, true_pairs, drawn = filters(chunk)
                assert drawn is not None  # targeted: sampled candidates
                ids, _ = draw_candidates(
                    _candidates((chunk.numel(), targets.size(1)),
                                answer[chunk], true_pairs, allowed),
                    drawn[1], drawn[0], drawn[2])
                rows = query_of[chunk] - start
                targets[rows.view(-1, 1), ids] = True
                targets[rows, answer[chunk]] = True
            scores = model(graph, h, q, targets=targets)
        else:
            scores = model(graph, h, q)
        stacked = scores.dim() == 3
        if not stacked:
            scores = scores.unsqueeze(0)
        while len(out) < scores.size(0):
            out.append(new_ranking())
        for chunk in batch.split(batch_size):
            allowed, true_pairs, drawn = filters(chunk)
            for ranking, part in zip(out, scores):
                ranks = filtered_ranks(
                    part.index_select(0, query_of[chunk] - start),
                    answer[chunk], true_pairs, allowed, drawn)
                for key in KEYS:
                    ranking[key][chunk.cpu()] = ranks[key].cpu()
        return batch.numel()

    # On the CPU, the first batch is one query whose peak memory sizes the
    # others (ranking_batch): the scores of every entity and the model's
    # intermediates, per query, can outgrow the memory on a large KG (on
    # 937k entities, the model's 256 queries took 13 GB).
    Q = query_head.numel()
    start, size, answers = 0, batch_size, []
    if device.type == 'cpu' and batch_size > 1 and Q > 1:
        peak = resident_peak(lambda: answers.append(rank_batch(0, 1)))
        if peak is not None:
            start, size = 1, ranking_batch(peak, batch_size)
    # The batches reported: the one-query batch counts with the next.
    report = None if progress is None else progress(-(-(Q - start) // size))
    while start < Q:
        stop = min(start + size, Q)
        answered = rank_batch(start, stop) + sum(answers)
        answers.clear()
        if report is not None:
            report.update(answered)
        start = stop
    if report is not None:
        report.close()
    model.train(was_training)
    if not out:  # no queries: one empty ranking
        out.append(new_ranking())
    return out, stacked


def evaluate(model: Module, data: Any, split: Union[str, Tensor] = 'test',
             tie: str = 'realistic', batch_size: int = 256,
             typed: bool = True, num_candidates: Optional[int] = None,
             candidate_seed: int = 0) -> Dict:
    r"""Filtered MR, MRR and Hits@1/3/10 of a model on a split of a KG (or
    given triples), both directions pooled, overall and per relation named
    by the KG's :obj:`relation_names` (see :func:`compute_ranks` and
    :meth:`Ranks.metrics`); typed in a KG with node types unless
    :obj:`typed=False`; against :obj:`num_candidates` sampled candidates
    per answer if given (the OGB protocol)."""
    kg = as_kg(data)
    return _ranks(model, data, kg, split, None, batch_size, False,
                  typed=typed, num_candidates=num_candidates,
                  candidate_seed=candidate_seed).metrics(
                      tie, list(kg.relation_names))


__all__ = ['TrueAnswers', 'filtered_ranks', 'rank_metrics', 'compute_ranks',
           'rank_queries', 'evaluate', 'Ranks', 'both_directions',
           'sampled_hits']
