r"""Reading the learned rules out of a rule reasoner.

A rule for query relation :math:`q` is a path of edge types
:math:`(k_1, \ldots, k_m)`, :math:`m \leq L`.  Its confidence is the total
attention of the operator paths that apply it:

.. math::
    \mathrm{conf}(k_1, \ldots, k_m) = \sum_{j=1}^{T}
    \sum_{\text{paths } (o_1, \ldots, o_L) \to (k_1, \ldots, k_m)}
    \prod_{l=1}^{L} a^{(j)}_{l, o_l},

where the sum runs over the ways of padding the rule with identity steps
(:obj:`[r, id]` and :obj:`[id, r]` are the same rule :obj:`r`).  Confidences
are reported relative to the best rule of the same query, as in the paper.

Text form: edge types :math:`k \geq R` are inverse relations and are written
with swapped arguments (:obj:`inv_r(X, Z)` is printed as :obj:`r(Z,X)`); a head
query :math:`r + R` is printed as :obj:`r(Y,X) <= ...`.
"""
import itertools
from dataclasses import dataclass
from typing import List, Sequence, Tuple

import torch
from torch import Tensor


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
        atoms = [_atom(k, variables[i], variables[i + 1], relation_names)
                 for i, k in enumerate(self.body)]
        head = _atom(self.head, 'X', 'Y', relation_names)
        return f"{head} <= {', '.join(atoms)}  {self.confidence:.2f}"


def _atom(edge_type: int, a: str, b: str, names: Sequence[str]) -> str:
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
def extract_rules(model: torch.nn.Module, relation: int, k: int = 10,
                  beam_width: int = 0) -> List[Rule]:
    r"""The top-:obj:`k` rules of query relation :obj:`relation`, found by
    beam search over each rank's attention (never by enumerating all
    :math:`(K+1)^L` paths), then scored exactly by :func:`rule_confidence`.

    Args:
        model (RuleReasoner): A trained rule reasoner.
        relation (int): The query relation in :math:`[0, 2R)`.
        k (int, optional): How many rules. (default: :obj:`10`)
        beam_width (int, optional): Paths kept per step and rank.
            (default: :obj:`0`, meaning :obj:`max(4 * k, 20)`)
    """
    K = model.num_edge_types
    if not 0 <= relation < K:
        raise ValueError(f"'relation' must be in [0, {K}), got {relation}")
    beam_width = beam_width or max(4 * k, 20)
    attention = model.operator_attention(
        torch.tensor([relation],
                     device=model.query_embedding.weight.device))[0].cpu()
    T, L, _ = attention.shape
    candidates = set()
    for j in range(T):
        beam = [((), 1.)]
        for step in range(L):
            weight = attention[j, step]
            extended = [(path + (o, ), score * float(weight[o]))
                        for path, score in beam for o in range(K + 1)]
            extended.sort(key=lambda item: -item[1])
            beam = extended[:beam_width]
        for path, _ in beam:
            body = tuple(o for o in path if o != K)
            if body:
                candidates.add(body)
    scored = [(body, rule_confidence(attention, body)) for body in candidates]
    if not scored:
        return []
    best = max(score for _, score in scored)
    scored.sort(key=lambda item: (-item[1], item[0]))
    return [Rule(relation, body, score / best) for body, score in scored[:k]]
