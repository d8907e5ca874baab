r"""Reasoning saturation of rule patterns (Section 5.1.2 of the DegreEmbed
paper, Definitions 3-4, Eqs. 13-16).

For a query relation :math:`q` with triples :math:`\mathcal{G}(q)` and a
pattern :math:`\mathbf{p} = (k_1, \ldots, k_l)`, let :math:`n_{\mathbf{p}}(h,
t)` be the number of paths of pattern :math:`\mathbf{p}` from :math:`h` to
:math:`t` in the graph without the triple :math:`(h, q, t)` itself (and its
inverse edge), and :math:`n(h, t)` the number of paths of every counted
pattern:

.. math::
    \gamma^{\mathbf{p}}_q = \frac{1}{|\mathcal{G}(q)|}
    \sum_{(h,q,t)} [n_{\mathbf{p}}(h,t) > 0], \quad
    \delta^{\mathbf{p}}_q = \frac{1}{|\mathcal{G}(q)|}
    \sum_{(h,q,t)} \frac{n_{\mathbf{p}}(h,t)}{n(h,t)}, \quad
    \eta^{\mathbf{p}}_q = \gamma^{\mathbf{p}}_q \, \delta^{\mathbf{p}}_q

(a ratio with :math:`n(h, t) = 0` counts as 0).  Path counts come from a
vectorised frontier expansion over the graph's CSR structure, grouped by
(triple, entity, pattern) after every step: no Python loop over paths, and
no dense :math:`N \times N` matrix.

The paper leaves open which graph, which lengths and whether inverse edges
count; all three are options, see :func:`saturation`.  Its Tables 2 and 6
are reproduced exactly with every split as the graph and no inverse edges
(the defaults).
"""
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch_geometric.data import Data

from pyg_degreembed.data.convert import as_kg
from pyg_degreembed.data.kg import (SPLITS, add_inverse_edges, all_triples,
                                    split_triples)
from pyg_degreembed.data.typed_graph import TypedGraph
from pyg_degreembed.interpret.paths import (check_pattern_keys, path_counts,
                                            pattern_of)


@dataclass(frozen=True)
class Saturation:
    r"""Saturations of one pattern for one query relation."""
    relation: int
    pattern: Tuple[int, ...]
    macro: float
    micro: float
    comprehensive: float


def saturation(
    data: Data,
    num_steps: int = 2,
    graph: str = 'all',
    inverse: bool = False,
    min_length: int = 1,
    relations: Optional[Sequence[int]] = None,
) -> List[Saturation]:
    r"""Macro, micro and comprehensive saturation of every pattern of length
    :obj:`min_length` to :obj:`num_steps` for every relation.

    Args:
        data (torch_geometric.data.Data): The KG.
        num_steps (int, optional): The maximum pattern length :math:`L`.
            (default: :obj:`2`)
        graph (str, optional): The triples that form the graph and
            :math:`\mathcal{G}(q)`: :obj:`"all"` (every split, as a property
            of the KG) or :obj:`"observed"` (facts and train).
            (default: :obj:`"all"`)
        inverse (bool, optional): Count paths along inverse edges too.
            The default (:obj:`False`) with :obj:`graph="all"` is the
            paper's convention: it reproduces its Tables 2 and 6 on Family
            to two decimals.  Use :obj:`True` to compare with learned rules,
            whose bodies use inverse relations. (default: :obj:`False`)
        min_length (int, optional): The shortest pattern counted (the paper's
            :math:`\mathbb{H}^L` starts at 2). (default: :obj:`1`)
        relations (Sequence[int], optional): Query relations in
            :math:`[0, R)`. (default: all)

    :rtype: List[:class:`Saturation`], sorted by relation, then by
        decreasing comprehensive saturation.
    """
    if graph not in ('all', 'observed'):
        raise ValueError(f"'graph' must be 'all' or 'observed', got {graph!r}")
    if num_steps < 1 or not 1 <= min_length <= num_steps:
        raise ValueError(f"'num_steps' must be at least 1 and 'min_length' "
                         f"in [1, num_steps], got {num_steps} and "
                         f"{min_length}")
    data = as_kg(data)
    R, N = data.num_relations, data.num_nodes
    triples = all_triples(data) if graph == 'all' else torch.cat(
        [split_triples(data, s) for s in SPLITS[:2]], dim=1)
    edge_index, edge_type = triples[[0, 2]], triples[1]
    if inverse:
        edge_index, edge_type = add_inverse_edges(edge_index, edge_type, R)
    typed = TypedGraph(edge_index, edge_type, N, 2 * R)
    if relations is not None:
        triples = triples[:, torch.isin(triples[1],
                                        torch.as_tensor(relations))]
    check_pattern_keys(2 * R, num_steps, 2 * R)
    trip, pattern, count = path_counts(typed, triples, num_steps, R,
                                       min_length)
    total = torch.zeros(triples.size(1), dtype=torch.long).index_add_(
        0, trip, count)
    share = count.double() / total[trip].double()

    query = triples[1][trip]
    n_q = torch.bincount(triples[1], minlength=R).double()
    key = query * (2 * R + 1)**num_steps + pattern
    key, inverse_index = torch.unique(key, return_inverse=True)
    macro = torch.zeros(key.numel(), dtype=torch.double).index_add_(
        0, inverse_index, torch.ones_like(share))
    micro = torch.zeros(key.numel(), dtype=torch.double).index_add_(
        0, inverse_index, share)
    q_of = key // (2 * R + 1)**num_steps
    macro, micro = macro / n_q[q_of], micro / n_q[q_of]
    out = [
        Saturation(int(r), pattern_of(int(p), 2 * R), float(g), float(d),
                   float(g * d)) for r, p, g, d in zip(
                       q_of, key % (2 * R + 1)**num_steps, macro, micro)
    ]
    out.sort(key=lambda s: (s.relation, -s.comprehensive, s.pattern))
    return out


def saturation_table(items: List[Saturation], relation_names: List[str],
                     top: int = 5) -> str:
    r"""The top patterns per relation as a Markdown table, like the paper's
    Tables 2 and 6."""
    from pyg_degreembed.interpret.rules import Rule
    lines = ['| rule | macro γ | micro δ | comprehensive η |',
             '|---|---|---|---|']
    shown: Dict[int, int] = {}
    for s in items:
        if shown.get(s.relation, 0) >= top:
            continue
        shown[s.relation] = shown.get(s.relation, 0) + 1
        text = Rule(s.relation, s.pattern, 0.).format(relation_names)
        text = text.rsplit('  ', 1)[0]
        lines.append(f'| {text} | {s.macro:.2f} | {s.micro:.2f} | '
                     f'{s.comprehensive:.2f} |')
    return '\n'.join(lines)
