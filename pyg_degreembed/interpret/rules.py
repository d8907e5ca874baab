r"""Reading the learned rules out of a rule reasoner.

A rule for query relation :math:`q` is a path of edge types
:math:`(k_1, \ldots, k_m)`, :math:`m \leq L`.  Two confidences are offered.

**Grounded** (the default, :func:`grounded_rules`): the share of the model's
score mass that the rule carries on a set of queries of :math:`q` (the
training queries by default, each without its own edge, as in training).
The score of an answer is an exact sum over grounded operator paths (see
:mod:`pyg_degreembed.interpret.explain`); a rule's mass is the sum of the
contributions of the paths that apply it (identity steps merged), over the
queries' true answers, and its confidence is that mass over the total score
of those answers.  It includes :math:`\rho`, so it says what the model
actually does; the confidences of a query relation add up to at most 1
(the rest is the identity path, :math:`h = t`), and a rule that holds for
no query has confidence 0 and is not listed.

**Attention** (:obj:`confidence="attention"`): the total attention of the
operator paths that apply the rule, whatever the graph:

.. math::
    \mathrm{conf}(k_1, \ldots, k_m) = \sum_{j=1}^{T}
    \sum_{\text{paths } (o_1, \ldots, o_L) \to (k_1, \ldots, k_m)}
    \prod_{l=1}^{L} a^{(j)}_{l, o_l},

where the sum runs over the ways of padding the rule with identity steps
(:obj:`[r, id]` and :obj:`[id, r]` are the same rule :obj:`r`).  These
confidences are reported relative to the best rule of the same query, as in
the paper.  In DRUM (:math:`\rho = 1`) the two orders mostly agree; in
DegreEmbed :math:`\rho` decides which paths carry score, and the attention
can rank high a rule that never fires.

Text form: edge types :math:`k \geq R` are inverse relations and are written
with swapped arguments (:obj:`inv_r(X, Z)` is printed as :obj:`r(Z,X)`); a head
query :math:`r + R` is printed as :obj:`r(Y,X) <= ...`.
"""
import itertools
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import torch
from torch import Tensor

from pyg_degreembed.data.kg import split_triples
from pyg_degreembed.interpret.paths import path_counts, pattern_of
from pyg_degreembed.nn.rule_reasoner import RuleReasoner

CONFIDENCES = ('grounded', 'attention')
#: Attention rules are found by enumerating every operator path when there
#: are at most this many, else by beam search.
EXACT_PATHS = 1 << 20


@dataclass(frozen=True)
class Rule:
    r"""A learned rule.

    Attributes:
        head (int): The query relation in :math:`[0, 2R)`.
        body (Tuple[int, ...]): Edge types :math:`(k_1, \ldots, k_m)` in
            :math:`[0, 2R)`.
        confidence (float): Confidence relative to the best rule of the query.
    """
    head: int
    body: Tuple[int, ...]
    confidence: float

    def format(self, relation_names: Sequence[str]) -> str:
        r"""The rule as text, e.g.
        :obj:`brother(X,Y) <= sister(X,Z), brother(Z,Y)  0.81`."""
        m = len(self.body)
        variables = ['X'] + (['Z'] if m == 2 else
                             [f'Z{i}' for i in range(1, m)]) + ['Y']
        atoms = [format_atom(k, variables[i], variables[i + 1], relation_names)
                 for i, k in enumerate(self.body)]
        head = format_atom(self.head, 'X', 'Y', relation_names)
        return f"{head} <= {', '.join(atoms)}  {self.confidence:.2f}"


def format_atom(edge_type: int, a: str, b: str, names: Sequence[str]) -> str:
    r"""The atom :obj:`r(a,b)` of edge type :obj:`edge_type` (an inverse
    type :obj:`inv_r` is written :obj:`r(b,a)`)."""
    R = len(names)
    if edge_type >= R:
        return f'{names[edge_type - R]}({b},{a})'
    return f'{names[edge_type]}({a},{b})'


def rule_confidence(attention: Tensor, body: Sequence[int]) -> float:
    r"""The (unnormalised) confidence of a rule body given the attention
    :obj:`[T, L, K + 1]` of its query, summing over identity paddings."""
    T, L, K1 = attention.shape
    identity = K1 - 1
    total = 0.
    for slots in itertools.combinations(range(L), len(body)):
        path = [identity] * L
        for slot, k in zip(slots, body):
            path[slot] = k
        steps = torch.arange(L)
        total += float(attention[:, steps, torch.tensor(path)].prod(-1).sum())
    return total


@torch.no_grad()
def extract_rules(model: RuleReasoner, relation: int, k: int = 10,
                  confidence: str = 'grounded', data: Any = None,
                  triples: Optional[Tensor] = None,
                  beam_width: int = 0) -> List[Rule]:
    r"""The top-:obj:`k` rules of query relation :obj:`relation`.

    Args:
        model (RuleReasoner): A trained rule reasoner.
        relation (int): The query relation in :math:`[0, 2R)`.
        k (int, optional): How many rules. (default: :obj:`10`)
        confidence (str, optional): :obj:`"grounded"` (the share of the
            model's score mass on queries of the relation, see
            :func:`grounded_rules`; needs :obj:`data`) or
            :obj:`"attention"` (every one of the :math:`(K+1)^L` operator
            paths where there are at most :data:`EXACT_PATHS`, else a beam
            search over each rank's attention whose rules are then scored
            exactly by :func:`rule_confidence`). (default:
            :obj:`"grounded"`)
        data (optional): The KG, for grounded confidences.
        triples (torch.Tensor, optional): Queries :obj:`[3, n]` to ground
            on (default: the training queries of the relation).
        beam_width (int, optional): Paths kept per step and rank of the
            attention beam search. (default: :obj:`0`, meaning
            :obj:`max(4 * k, 20)`)
    """
    K = model.num_edge_types
    if not 0 <= relation < K:
        raise ValueError(f"'relation' must be in [0, {K}), got {relation}")
    if k < 0:
        raise ValueError(f"'k' must be at least 0, got {k}")
    if confidence not in CONFIDENCES:
        raise ValueError(f"'confidence' must be one of {CONFIDENCES}, got "
                         f"{confidence!r}")
    if confidence == 'grounded':
        if data is None:
            raise ValueError("Grounded rule confidences need the KG: pass "
                             "data=..., or confidence='attention'")
        return grounded_rules(model, data, relation, triples)[:k]
    attention = model.operator_attention(
        torch.tensor([relation],
                     device=model.query_embedding.weight.device))[0].cpu()
    T, L, _ = attention.shape
    if (K + 1)**L <= EXACT_PATHS:
        scored = _all_bodies(attention)
    else:
        candidates = _beam_bodies(attention, beam_width or max(4 * k, 20))
        scored = [(body, rule_confidence(attention, body))
                  for body in candidates]
    if not scored:
        return []
    best = max(score for _, score in scored)
    scored.sort(key=lambda item: (-item[1], item[0]))
    return [Rule(relation, body, score / best) for body, score in scored[:k]]


def _all_bodies(attention: Tensor) -> List[Tuple[Tuple[int, ...], float]]:
    # Every operator path at once: the product of its attentions per rank,
    # summed over ranks and over the paths of the same body (identity
    # steps dropped), as pattern ids.
    T, L, K1 = attention.shape
    product = attention[:, 0].double()
    pattern = torch.arange(K1) + 1
    pattern[K1 - 1] = 0  # the identity adds nothing to the body
    for step in range(1, L):
        product = (product.unsqueeze(-1) *
                   attention[:, step].double().unsqueeze(1)).view(T, -1)
        op = torch.arange(K1).repeat(pattern.numel())
        pattern = pattern.repeat_interleave(K1)
        pattern = torch.where(op == K1 - 1, pattern, pattern * K1 + op + 1)
    bodies, index = torch.unique(pattern, return_inverse=True)
    mass = torch.zeros(bodies.numel(), dtype=torch.double).index_add_(
        0, index, product.sum(0))
    return [(pattern_of(int(b), K1 - 1), float(m))
            for b, m in zip(bodies, mass) if b > 0]


def _beam_bodies(attention: Tensor, beam_width: int) -> set:
    # The bodies of the beam_width best operator paths of each rank.
    T, L, K1 = attention.shape
    candidates: Set[Tuple[int, ...]] = set()
    for j in range(T):
        beam: List[Tuple[Tuple[int, ...], float]] = [((), 1.)]
        for step in range(L):
            weight = attention[j, step]
            extended = [(path + (o, ), score * float(weight[o]))
                        for path, score in beam for o in range(K1)]
            extended.sort(key=lambda item: -item[1])
            beam = extended[:beam_width]
        for path, _ in beam:
            body = tuple(o for o in path if o != K1 - 1)
            if body:
                candidates.add(body)
    return candidates


def training_queries(data: Any, relation: int) -> Tensor:
    r"""The training queries :math:`(h, q, t)` of query relation :math:`q
    \in [0, 2R)` (for :math:`q \geq R`, the training triples of
    :math:`q - R` turned around), shape :obj:`[3, n]`."""
    from pyg_degreembed.data.convert import as_kg
    kg = as_kg(data)
    R = kg.num_relations
    train = split_triples(kg, 'train')
    rows = train[:, train[1] == relation % R]
    if relation >= R:
        rows = torch.stack([rows[2], torch.full_like(rows[1], relation),
                            rows[0]])
    return rows


@torch.no_grad()
def grounded_rules(model: RuleReasoner, data: Any, relation: int,
                   triples: Optional[Tensor] = None,
                   batch_size: int = 256) -> List[Rule]:
    r"""Every rule of query relation :obj:`relation` that carries score on
    the queries, with its grounded confidence (the share of the model's
    score mass; see the module's description), best first.

    Vectorised: per batch of queries, one pass of the model for the
    path factors (:meth:`~pyg_degreembed.RuleReasoner.path_factors`) and one
    weighted path count for all rule bodies
    (:func:`~pyg_degreembed.interpret.paths.path_counts` with :math:`\rho`).

    Args:
        model (RuleReasoner): A trained rule reasoner.
        data: The KG, in any layout :func:`~pyg_degreembed.as_kg` reads.
        relation (int): The query relation in :math:`[0, 2R)`.
        triples (torch.Tensor, optional): Queries :obj:`[3, n]` whose true
            answers the mass is measured at; rows of other relations are
            ignored. (default: the training queries,
            :func:`training_queries`)
        batch_size (int, optional): Queries per pass. (default: :obj:`256`)
    """
    mass, total = rule_masses(model, data, relation, triples, batch_size)
    rules = [Rule(relation, body, value / total) for body, value in
             mass.items() if body and value > 0]
    rules.sort(key=lambda rule: (-rule.confidence, rule.body))
    return rules


@torch.no_grad()
def rule_masses(model: RuleReasoner, data: Any, relation: int,
                triples: Optional[Tensor] = None, batch_size: int = 256
                ) -> Tuple[Dict[Tuple[int, ...], float], float]:
    r"""The score mass of every rule body (the empty body is the identity
    path) summed over the queries, and the queries' total score; see
    :func:`grounded_rules`."""
    if triples is None:
        triples = training_queries(data, relation)
    triples = triples[:, triples[1] == relation]
    graph = model.graph(data)
    triples = triples.to(graph.device)
    was_training = model.training
    model.eval()
    mass: Dict[Tuple[int, ...], float] = {}
    for start in range(0, triples.size(1), batch_size):
        h, q, t = triples[:, start:start + batch_size]
        # coef[b, j, l, o] = a / Z: the factor of operator o at step l;
        # rho as each query sees it (its degree sets without its edge).
        coef, rho = model.path_factors(graph, h, q, remove_tail=t)
        trip, pattern, value = path_counts(
            graph, torch.stack([h, q, t]), model.num_steps,
            model.num_relations, weight=rho)
        bodies, body_of = torch.unique(pattern, return_inverse=True)
        contribution = value.double() * _padded_products(
            coef, trip, bodies[body_of], model.num_edge_types)
        per_body = contribution.new_zeros(bodies.numel()).index_add_(
            0, body_of, contribution)
        for pid, v in zip(bodies.tolist(), per_body.tolist()):
            body = pattern_of(pid, model.num_edge_types)
            mass[body] = mass.get(body, 0.) + v
        identity = coef[..., -1].prod(-1).sum(-1)  # [B]: all steps stay
        mass[()] = mass.get((), 0.) + float(identity[h == t].sum())
    model.train(was_training)
    # The grounded paths are all of each score (exact explanations), so
    # the masses add up to the queries' total score.
    return mass, max(sum(mass.values()), 1e-300)


def _padded_products(coef: Tensor, query: Tensor, pattern: Tensor,
                     num_edge_types: int) -> Tensor:
    r"""For each (query, body) pair, :math:`\sum_j \sum_{\text{paddings}}
    \prod_l \mathrm{coef}[b, j, l, o_l]` over the ways of placing the body's
    edge types among the :math:`L` steps (identity elsewhere)."""
    B, T, L, K1 = coef.shape
    K = num_edge_types
    # Digits of the pattern ids (most significant first) and lengths.
    length = torch.zeros_like(pattern)
    for m in range(1, L + 1):
        length[pattern >= (K + 1)**(m - 1)] = m
    out = coef.new_zeros(pattern.numel())
    for m in range(1, L + 1):
        sel = (length == m).nonzero().view(-1)
        if sel.numel() == 0:
            continue
        digits = [(pattern[sel] // (K + 1)**(m - 1 - i)) % (K + 1) - 1
                  for i in range(m)]
        b = query[sel]
        for slots in itertools.combinations(range(L), m):
            product = coef.new_ones(sel.numel(), T)
            body = iter(digits)
            for step in range(L):
                op = next(body) if step in slots else \
                    torch.full_like(b, K)
                product = product * coef[b, :, step].gather(
                    2, op.view(-1, 1, 1).expand(-1, T, 1)).squeeze(-1)
            out[sel] += product.sum(-1)
    return out
