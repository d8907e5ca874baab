r"""Predictions a user can act on: the best new answers of a query."""
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

import torch
from torch.nn import Module

from pyg_degreembed.data.convert import as_kg
from pyg_degreembed.data.kg import (all_triples, answer_types,
                                    check_head_type, entity_index,
                                    relation_index, typed_entity)


@dataclass(frozen=True)
class Prediction:
    r"""One answer of a query :obj:`(head, relation, ?)`.

    Attributes:
        entity (int): The answer.
        score (float): Its score.
        known (bool): Whether the triple is already in the KG (any split).
        is_head (bool): Whether the answer is the query's head itself.
        node (Tuple[str, int], optional): The answer as :obj:`(node_type,
            local_id)` in a typed KG (one built from a :obj:`HeteroData`),
            :obj:`None` in an untyped one.
    """
    entity: int
    score: float
    known: bool
    is_head: bool
    node: Optional[Tuple[str, int]] = None


def reflexive(data: Any, relation: int) -> bool:
    r"""Whether the KG holds a triple :math:`(e, r, e)` of relation
    :obj:`relation` (:math:`r + R` counts as :math:`r`)."""
    kg = as_kg(data)
    triples = all_triples(kg)
    r = relation % kg.num_relations
    return bool(((triples[1] == r) & (triples[0] == triples[2])).any())


@torch.no_grad()
def predict(model: Module, data: Any, head: Any, relation: Any,
            k: int = 10, filter_known: bool = True,
            typed: bool = True) -> List[Prediction]:
    r"""The top-:obj:`k` answers of :obj:`(head, relation, ?)` on the KG's
    observed graph, best first; entities the model gives score 0 (no rule
    path reaches them) are never listed.

    The head itself is an answer only if the relation is reflexive
    somewhere in the KG (see :func:`reflexive`; then it is marked
    :obj:`is_head`).  With :obj:`filter_known=True` (what a user asking
    "what is missing?" wants) the answers that make a triple already in the
    KG (facts, train, valid or test) are left out; with
    :obj:`filter_known=False` they are listed too, marked :obj:`known`.

    Args:
        model (RuleReasoner): A trained model.
        data: The KG, in any layout :func:`~pyg_degreembed.as_kg` reads.
        head (int, str or (str, int)): The head entity: its index, its
            name, or :obj:`(node_type, local_id)` in a typed KG (one built
            from a :obj:`HeteroData`); in a typed KG a head of another type
            than the relation's source type is refused (with
            :obj:`typed`).
        relation (int or str): The query relation in :math:`[0, 2R)`
            (:math:`r + R` asks for the heads of :math:`r`), or its name
            (:obj:`"inv_r"` for :math:`r + R`).
        k (int, optional): How many answers at most. (default: :obj:`10`)
        filter_known (bool, optional): Leave out the answers of known
            triples. (default: :obj:`True`)
        typed (bool, optional): In a KG with node types (built from a
            :obj:`HeteroData`), list only entities of the relation's answer
            type (:func:`~pyg_degreembed.data.kg.answer_types`).
            (default: :obj:`True`)
    """
    if not isinstance(k, int) or isinstance(k, bool):
        raise TypeError(f"'k' must be a whole number, got {k!r}")
    if k < 0:
        raise ValueError(f"'k' must be at least 0, got {k}")
    kg = as_kg(data)
    head, relation = entity_index(kg, head), relation_index(kg, relation)
    if typed:
        check_head_type(kg, head, relation)
    scores = model(data, [head], [relation])[0].cpu()
    # The known answers: one scan of the triples (no index for one query).
    triples = all_triples(kg)
    R = kg.num_relations
    asked, answer = (0, 2) if relation < R else (2, 0)
    match = (triples[1] == relation % R) & (triples[asked] == head)
    known = torch.zeros_like(scores, dtype=torch.bool)
    known[triples[answer][match]] = True
    candidate = scores > 0
    types = answer_types(kg) if typed else None
    if types is not None:
        candidate &= types[0].cpu() == types[1][relation].cpu()
    if filter_known:
        candidate &= ~known
    if not reflexive(kg, relation):
        candidate[head] = False
    order = torch.argsort(torch.where(candidate, scores, -1.),
                          descending=True, stable=True)
    order = order[:min(k, int(candidate.sum()))]
    return [Prediction(int(e), float(scores[e]), bool(known[e]),
                       int(e) == head, typed_entity(kg, int(e)))
            for e in order]
