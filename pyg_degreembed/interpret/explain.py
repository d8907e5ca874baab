r"""Why did the model score an answer?  Exact per-path explanations.

With the normalisers :math:`Z^{(j)}_l = \sum_i (\ldots)_i` of each step
treated as the constants they are for one query, the score of candidate
:math:`t` is a sum over grounded operator paths
:math:`h = z_0 \xrightarrow{o_1} z_1 \cdots \xrightarrow{o_L} z_L = t`
(an identity step keeps the entity):

.. math::
    \mathrm{score}(t) = \sum_{j=1}^{T} \sum_{\text{paths}}
    \prod_{l=1}^{L} \frac{w^{(j)}_l}{Z^{(j)}_l}, \qquad
    w^{(j)}_l = \begin{cases}
    a^{(j)}_{l,k} \, \rho_{z_{l-1},k} \, m(z_{l-1}, k, z_l) &
    o_l = k \text{ (an edge type, } m \text{ its multiplicity)} \\
    a^{(j)}_{l,0} & o_l = \text{identity}
    \end{cases}

Paths that apply the same rule along the same entities (:obj:`[r, id]` and
:obj:`[id, r]`) are merged.  The contributions add up to the model's score.
With :obj:`remove_edge=True` the query is explained as training sees it:
without its own edge and that edge's inverse, in the paths and in the degree
features, so a known fact is explained by the other evidence for it.
"""
import functools
from dataclasses import dataclass
from typing import (Any, Dict, List, Optional, Sequence, Set,
                    Tuple, Union)

import torch
from torch import Tensor

from pyg_degreembed.data.convert import as_kg
from pyg_degreembed.data.kg import (edge_type_name, entity_index, query_edges,
                                    relation_index)
from pyg_degreembed.data.typed_graph import TypedGraph
from pyg_degreembed.interpret.applied_rules import (AnswerTypeRule,
                                                    AppliedRules)
from pyg_degreembed.interpret.constant_rules import ConstantRule
from pyg_degreembed.interpret.rules import Rule, format_atom
from pyg_degreembed.nn.rule_reasoner import RuleReasoner


@dataclass(frozen=True)
class PathContribution:
    r"""One grounded rule path.

    Attributes:
        body (Tuple[int, ...]): The rule body (edge types).
        entities (Tuple[int, ...]): The entities :math:`h, z_1, \ldots, t`
            along the body (one more than the body's length).
        contribution (float): Its share of the score.
    """
    body: Tuple[int, ...]
    entities: Tuple[int, ...]
    contribution: float

    def format(self, entity_names: Sequence[str],
               relation_names: Sequence[str]) -> str:
        atoms = [
            format_atom(k, entity_names[self.entities[i]],
                        entity_names[self.entities[i + 1]], relation_names)
            for i, k in enumerate(self.body)
        ] or ['identity']
        return f"{', '.join(atoms)}  {self.contribution:.4g}"


@dataclass
class Explanation:
    r"""The explanation of :obj:`score` for the query
    :obj:`(head, relation, tail)`: :obj:`paths` sorted by contribution."""
    head: int
    relation: int
    tail: int
    score: float
    paths: List[PathContribution]

    def to_networkx(self, entity_names: Optional[Sequence[str]] = None,
                    relation_names: Optional[Sequence[str]] = None):
        r"""The explanation as a :class:`networkx.MultiDiGraph`.

        Nodes are the entities on the paths, with attributes :obj:`name`
        and :obj:`role` (:obj:`"head"`, :obj:`"tail"` or :obj:`""`).  Each
        distinct step :math:`z \xrightarrow{k} z'` of a path is one edge
        with key :obj:`k` and attributes :obj:`relation` (:math:`k`),
        :obj:`name` (:obj:`inv_r` for an inverse type), :obj:`weight` (the
        summed contributions of the paths through it) and :obj:`share`
        (:obj:`weight` over the score).  The graph's attributes hold the
        query and the score.
        """
        import networkx as nx
        graph = nx.MultiDiGraph(head=self.head, relation=self.relation,
                                tail=self.tail, score=self.score)

        def entity(e):
            return entity_names[e] if entity_names is not None else str(e)

        for e in (self.head, self.tail):
            graph.add_node(e, name=entity(e), role='head'
                           if e == self.head else 'tail')
        weight: Dict[Tuple[int, int, int], float] = {}
        for path in self.paths:
            steps = {(path.entities[i], path.entities[i + 1], k)
                     for i, k in enumerate(path.body)}
            for step in steps:
                weight[step] = weight.get(step, 0.) + path.contribution
        for (u, v, k), w in sorted(weight.items()):
            for node in (u, v):
                if node not in graph:
                    graph.add_node(node, name=entity(node), role='')
            graph.add_edge(u, v, key=k, relation=k,
                           name=str(k) if relation_names is None else
                           edge_type_name(relation_names, k),
                           weight=w, share=w / self.score if self.score
                           else 0.)
        return graph


def _keeps_mode(function):
    # Runs `function(model, ...)` with the model in eval mode and restores
    # the mode it had.
    @functools.wraps(function)
    def wrapper(model, *args, **kwargs):
        was_training = model.training
        model.eval()
        try:
            return function(model, *args, **kwargs)
        finally:
            model.train(was_training)
    return wrapper


@_keeps_mode
@torch.no_grad()
def explain(model: Union[RuleReasoner, AppliedRules], graph: Any,
            head: Union[int, str, Tuple[str, int]],
            relation: Union[int, str],
            tail: Union[int, str, Tuple[str, int]],
            max_paths: Optional[int] = None,
            remove_edge: bool = False
            ) -> Union[Explanation, Tuple[List[Union[Rule, ConstantRule]],
                                          Optional[AnswerTypeRule]]]:
    r"""Explains the score of :obj:`tail` for the query :obj:`(head,
    relation, ?)` by its grounded rule paths.  For
    :class:`~pyg_degreembed.AppliedRules` (which rank by their best rules,
    not by a sum over paths) it returns
    :meth:`~pyg_degreembed.AppliedRules.explain`'s rules that predict
    :obj:`tail`, best first, and the answer-type rule it satisfies.

    Args:
        model (RuleReasoner): A trained rule reasoner.
        graph: The graph to reason on: a KG (:obj:`Data`, :obj:`HeteroData`,
            a PyG KG dataset) or a :class:`~pyg_degreembed.TypedGraph`, as
            :meth:`~pyg_degreembed.RuleReasoner.forward` takes it.
        head (int or str or Tuple[str, int]): The head entity (a name where
            :obj:`graph` is a KG with names, or :obj:`(node_type,
            local_id)` where it is a :obj:`HeteroData`).
        relation (int or str): The query relation in :math:`[0, 2R)`, or
            its name (:obj:`inv_<name>` for the inverse query).
        tail (int or str): The candidate answer.
        max_paths (int, optional): Keep only the largest contributions.
            (default: :obj:`None`, all)
        remove_edge (bool, optional): Explain the score the query gets in
            training: without the edges :obj:`(head, relation, tail)` and
            :obj:`(tail, inverse relation, head)` (all copies), as
            :obj:`model(..., remove_tail=tail)` scores it.
            (default: :obj:`False`)
    """
    if max_paths is not None and max_paths < 0:
        raise ValueError(f"'max_paths' must be at least 0, got {max_paths}")
    if any(isinstance(x, (str, tuple)) for x in (head, relation, tail)):
        kg = as_kg(graph)  # names need the KG
        h, t = entity_index(kg, head), entity_index(kg, tail)
        r = relation_index(kg, relation)
    else:
        h, r, t = int(head), int(relation), int(tail)  # type: ignore
    if isinstance(model, AppliedRules):  # their own explanation
        return model.explain(graph, h, r, t)
    if not isinstance(model, RuleReasoner):
        raise TypeError(f'explain() takes a RuleReasoner or applied rules, '
                        f'got {type(model).__name__}')
    return _explain_paths(model, model.graph(graph), h, r, t, max_paths,
                          remove_edge)


def _explain_paths(model: RuleReasoner, graph: TypedGraph, head: int,
                   relation: int, tail: int, max_paths: Optional[int],
                   remove_edge: bool) -> Explanation:
    # explain() of a rule reasoner: its paths, enumerated.
    N, K, L, T = graph.num_nodes, model.num_edge_types, model.num_steps, \
        model.rank
    for name, value, bound in (('head', head, N), ('tail', tail, N),
                               ('relation', relation, K)):
        if not 0 <= value < bound:
            raise ValueError(f"'{name}' must be in [0, {bound}), got {value}")
    device = graph.device
    head_t = torch.tensor([head], device=device)
    relation_t = torch.tensor([relation], device=device)
    removed: Set[Tuple[int, int, int]] = set()
    remove_tail: Optional[Tensor] = None
    if remove_edge:
        remove_tail = torch.tensor([tail], device=device)
        left_out = query_edges(head_t, relation_t, remove_tail,
                               model.num_relations)
        removed = set(zip(*(x.view(-1).tolist() for x in left_out[:3])))
    score = float(model(graph, head_t, relation_t,
                        remove_tail=remove_tail)[0, tail])
    # weights[j, l, o]: a / Z for every rank, step and operator, with the
    # normalisers Z[j, l] of forward(); rho as this query sees it.
    weights, rho = model.path_factors(graph, head_t, relation_t,
                                      remove_tail=remove_tail)
    weights = weights[0]

    reach = _reaching(graph, tail, L)
    ptr = graph.node_ptr.tolist()
    src, typ, dst = (graph.edge_src.tolist(), graph.edge_type.tolist(),
                     graph.edge_dst.tolist())
    rho_of: Optional[Tensor] = None  # rho as this query sees it, [N, K]
    if rho is not None:
        every = torch.arange(N, device=device)
        rho_of = rho.table.index_select(0, rho.rows(
            every, torch.zeros_like(every))).double()
    # Partial paths: (entities, operators, per-rank weight [T]).
    Partial = List[Tuple[Tuple[int, ...], Tuple[int, ...], Tensor]]
    partial: Partial = [((head, ), (), torch.ones(T, dtype=torch.double,
                                                  device=device))]
    for step in range(L):
        extended: Partial = []
        for entities, ops, weight in partial:
            z = entities[-1]
            if z in reach[step + 1]:
                extended.append((entities + (z, ), ops + (K, ),
                                 weight * weights[:, step, K]))
            e = ptr[z]
            while e < ptr[z + 1]:
                k, j = typ[e], dst[e]
                count = 1
                while e + count < ptr[z + 1] and typ[e + count] == k and \
                        dst[e + count] == j:
                    count += 1
                if j in reach[step + 1] and (z, k, j) not in removed:
                    w = weights[:, step, k] * count
                    if rho_of is not None:
                        w = w * rho_of[src[e], k]
                    extended.append((entities + (j, ), ops + (k, ),
                                     weight * w))
                e += count
        partial = extended

    merged: Dict[Tuple[Tuple[int, ...], Tuple[int, ...]], float] = {}
    for entities, ops, weight in partial:
        body = tuple(o for o in ops if o != K)
        nodes = (head, ) + tuple(entities[i + 1] for i, o in enumerate(ops)
                                 if o != K)
        merged[(body, nodes)] = merged.get((body, nodes), 0.) + \
            float(weight.sum())
    paths = sorted((PathContribution(body, nodes, value)
                    for (body, nodes), value in merged.items()),
                   key=lambda p: (-p.contribution, p.body, p.entities))
    if max_paths is not None:
        paths = paths[:max_paths]
    return Explanation(head, relation, tail, score, paths)


def _reaching(graph: TypedGraph, tail: int, num_steps: int):
    r"""reach[l]: the entities from which :obj:`tail` can be reached in the
    remaining :obj:`num_steps - l` steps (identity steps allowed)."""
    reach: List[Set[int]] = [set() for _ in range(num_steps + 1)]
    reach[num_steps] = {tail}
    src, dst = graph.edge_src, graph.edge_dst
    for step in range(num_steps - 1, -1, -1):
        targets = torch.tensor(sorted(reach[step + 1]), device=dst.device)
        sources = src[torch.isin(dst, targets)].tolist()
        reach[step] = reach[step + 1] | set(sources)
    return reach
