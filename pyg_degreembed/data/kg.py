r"""The knowledge graph as a PyG :class:`~torch_geometric.data.Data` object.

The layout follows :class:`torch_geometric.datasets.RelLinkPredDataset`, with
the Neural-LP split of the training triples into *facts* (graph only) and
*train* (graph and training queries):

* :obj:`edge_index`, :obj:`edge_type`: the observed graph used for message
  passing, i.e. :math:`\text{facts} \cup \text{train}` plus the inverse of
  every edge with type :obj:`r + num_relations`.  Valid and test triples are
  never edges.
* :obj:`{split}_edge_index`, :obj:`{split}_edge_type` for
  :obj:`split in ("facts", "train", "valid", "test")`: the triples of each
  split (without inverses).
* :obj:`num_relations`: the number :math:`R` of KG relations (the graph has
  :math:`2R` edge types).
* :obj:`entity_names`, :obj:`relation_names`: lists of names, index = id.
"""
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.data import Data

SPLITS = ('facts', 'train', 'valid', 'test')
GRAPH_SPLITS = ('facts', 'train')
#: The one node type of an untyped KG (in :func:`scores_by_node_type` and
#: :func:`~pyg_degreembed.to_hetero_data`).
NODE_TYPE = 'entity'


def check_positive_ints(**values):
    r"""Refuses any argument that is not a positive :obj:`int` (a
    :obj:`bool` is not one), naming it."""
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or \
                value < 1:
            raise ValueError(f"'{name}' must be a positive integer, got "
                             f'{value!r}')


#: The longest rules (edges in a rule body, :obj:`num_steps`, :obj:`--steps`)
#: the library builds models for or mines: each step is a pass over the
#: graph, and rules longer than 5 have not helped on any benchmark.
MAX_RULE_LENGTH = 10
#: The most rules of a :class:`~pyg_degreembed.RuleReasoner` (rank
#: :math:`T`, one LSTM each; DRUM uses up to 4).
MAX_RANK = 100
#: The widest embedding or hidden layer (the memory check refuses what
#: does not fit well before).
MAX_CHANNELS = 1 << 16


def check_at_most(limit: int, what: str = '', **values):
    r"""Refuses any argument above :obj:`limit` (checked with
    :func:`check_positive_ints` first), naming it and, in :obj:`what`, why
    the limit is there."""
    check_positive_ints(**values)
    for name, value in values.items():
        if value > limit:
            raise ValueError(f"'{name}' must be at most {limit}"
                             f"{' (' + what + ')' if what else ''}, got "
                             f'{value}')


def check_rule_length(num_steps: int):
    r"""Refuses a rule length :obj:`num_steps` that is not a whole number in
    :math:`[1,` :data:`MAX_RULE_LENGTH` :math:`]`."""
    check_at_most(MAX_RULE_LENGTH, 'the longest rules this library runs',
                  num_steps=num_steps)


def index_tensor(value, name: str) -> Tensor:
    r"""Returns :obj:`value` (a tensor, a list or an int) as a :obj:`long`
    tensor of ids; floating-point, complex and boolean values are refused
    with a :class:`TypeError` naming :obj:`name` (they would be truncated
    silently)."""
    try:
        tensor = torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError) as e:
        raise TypeError(f"'{name}' must be a tensor of integer ids, got "
                        f"{type(value).__name__} ({e})") from None
    if tensor.is_floating_point() or tensor.is_complex() or \
            tensor.dtype == torch.bool:
        raise TypeError(f"'{name}' must hold integer ids, got dtype "
                        f"{str(tensor.dtype).replace('torch.', '')}")
    return tensor.long()


def add_inverse_edges(edge_index: Tensor, edge_type: Tensor,
                      num_relations: int):
    r"""Returns the edges together with their inverses: an edge
    :math:`(i, r, j)` gets the companion :math:`(j, r + R, i)`.

    Args:
        edge_index (torch.Tensor): Edge indices of shape :obj:`[2, E]`.
        edge_type (torch.Tensor): Relation ids in :obj:`[0, R)`, shape
            :obj:`[E]`.
        num_relations (int): The number :math:`R` of relations.

    :rtype: (:class:`torch.Tensor` of shape :obj:`[2, 2E]`,
        :class:`torch.Tensor` of shape :obj:`[2E]`)
    """
    src, dst = edge_index
    edge_index = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])
    edge_type = torch.cat([edge_type, edge_type + num_relations])
    return edge_index, edge_type


def inverse_relation(relation: Tensor, num_relations: int) -> Tensor:
    r"""Maps an edge type :math:`k \in [0, 2R)` to its inverse type."""
    return (relation + num_relations) % (2 * num_relations)


def query_edges(head: Tensor, relation: Tensor, tail: Tensor,
                num_relations: int) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""The edges the queries :obj:`(head, relation, tail)` leave out, each
    its own and that edge's inverse, as :obj:`(src, edge_type, dst, query)`
    with :obj:`query` the position of the query, each of shape
    :obj:`[B, 2]` (column 0 the edge, column 1 its inverse)."""
    query = torch.arange(head.numel(), device=head.device)
    return (torch.stack([head, tail], -1),
            torch.stack([relation, inverse_relation(relation,
                                                    num_relations)], -1),
            torch.stack([tail, head], -1), torch.stack([query, query], -1))


def kg_data(
    num_nodes: int,
    num_relations: int,
    splits: Dict[str, Tensor],
    entity_names: Optional[Sequence[str]] = None,
    relation_names: Optional[Sequence[str]] = None,
) -> Data:
    r"""Builds the knowledge-graph :class:`~torch_geometric.data.Data` object
    from triples given per split.

    Args:
        num_nodes (int): The number of entities :math:`N`.
        num_relations (int): The number of relations :math:`R`.
        splits (Dict[str, torch.Tensor]): Triples per split name
            (:obj:`"facts"`, :obj:`"train"`, :obj:`"valid"`, :obj:`"test"`) as
            :obj:`[3, n]` tensors of rows (head, relation, tail).  Missing
            splits are empty.
        entity_names (List[str], optional): Names of the entities.
        relation_names (List[str], optional): Names of the relations.
    """
    unknown = set(splits) - set(SPLITS)
    if unknown:
        raise ValueError(f"Unknown split name(s) {sorted(unknown)}; "
                         f"expected a subset of {SPLITS}")
    splits = {
        split: index_tensor(splits[split], f'{split} triples')
        if split in splits else torch.empty(3, 0, dtype=torch.long)
        for split in SPLITS
    }
    check_triples(splits, num_nodes, num_relations)
    kwargs = {}
    for split, triples in splits.items():
        kwargs[f'{split}_edge_index'] = triples[[0, 2]].contiguous()
        kwargs[f'{split}_edge_type'] = triples[1].contiguous()

    edge_index = torch.cat([kwargs[f'{s}_edge_index'] for s in GRAPH_SPLITS],
                           dim=1)
    edge_type = torch.cat([kwargs[f'{s}_edge_type'] for s in GRAPH_SPLITS])
    edge_index, edge_type = add_inverse_edges(edge_index, edge_type,
                                              num_relations)
    data = Data(num_nodes=num_nodes, edge_index=edge_index,
                edge_type=edge_type, **kwargs)
    data.num_relations = num_relations
    data.entity_names = _names(entity_names, num_nodes, 'e')
    data.relation_names = _names(relation_names, num_relations, 'r')
    return data


def check_shape(split: str, triples: Tensor):
    r"""Rejects triples that are not a :obj:`[3, n]` tensor."""
    if triples.dim() != 2 or triples.size(0) != 3:
        raise ValueError(f'The {split} triples must have shape [3, n] '
                         f'(head, relation, tail), got '
                         f'{list(triples.shape)}')


def check_triples(splits: Dict[str, Tensor], num_nodes: int,
                  num_relations: int):
    r"""Rejects malformed triples with a :class:`ValueError` that names the
    split and the position (column) of the offending triple: a shape other
    than :obj:`[3, n]`, ids out of range, a triple twice in one split, or
    one triple in two splits."""
    for split, triples in splits.items():
        check_shape(split, triples)
        for row, bound, what in ((0, num_nodes, 'head entity'),
                                 (1, num_relations, 'relation'),
                                 (2, num_nodes, 'tail entity')):
            bad = ((triples[row] < 0) | (triples[row] >= bound)).nonzero()
            if bad.numel():
                i = int(bad[0])
                raise ValueError(
                    f'{split} triple {i} {tuple(triples[:, i].tolist())} '
                    f'has {what} id {int(triples[row, i])} outside '
                    f'[0, {bound})')
    names = list(splits)
    every = torch.cat([splits[s] for s in names], dim=1)
    which = torch.cat([torch.full((splits[s].size(1), ), i)
                       for i, s in enumerate(names)])
    position = torch.cat([torch.arange(splits[s].size(1)) for s in names])
    key = (every[0] * num_relations + every[1]) * num_nodes + every[2]
    key, order = torch.sort(key, stable=True)
    same = (key[1:] == key[:-1]).nonzero()
    if same.numel():
        a, b = order[int(same[0])], order[int(same[0]) + 1]
        triple = tuple(every[:, a].tolist())
        sa, sb = names[int(which[a])], names[int(which[b])]
        where = (f'twice in {sa} (positions {int(position[a])} and '
                 f'{int(position[b])})' if sa == sb else
                 f'in both {sa} (position {int(position[a])}) and {sb} '
                 f'(position {int(position[b])})')
        raise ValueError(f'The triple {triple} is {where}')


def split_triples(data: Data, split: str) -> Tensor:
    r"""Returns the triples of :obj:`split` as a :obj:`[3, n]` tensor of rows
    (head, relation, tail)."""
    if split not in SPLITS:
        raise ValueError(f"Unknown split {split!r}; the splits are "
                         f"{', '.join(SPLITS)}")
    edge_index = data[f'{split}_edge_index']
    return torch.stack([edge_index[0], data[f'{split}_edge_type'],
                        edge_index[1]])


def graph_triples(data: Data) -> Tensor:
    r"""The triples of the observed graph (facts and train), as a
    :obj:`[3, n]` tensor."""
    return torch.cat([split_triples(data, s) for s in GRAPH_SPLITS], dim=1)


def graph_queries(data: Data) -> Tensor:
    r"""The distinct queries :math:`(x, q, y)`, :math:`x \neq y`, of both
    directions (:math:`q \in [0, 2R)`) of the observed graph's triples
    (facts and train), sorted: the evidence the rules are counted on (a
    fact is as true an answer as a training triple).

    :rtype: :class:`torch.Tensor` of shape :obj:`[3, Q]`
    """
    R = data.num_relations
    h, r, t = graph_triples(data)
    queries = torch.stack([torch.cat([h, t]), torch.cat([r, r + R]),
                           torch.cat([t, h])])
    return unique_triples(queries[:, queries[0] != queries[2]])


def _packed(triples: Tensor) -> Optional[Tuple[Tensor, int, int]]:
    # One integer (h K + r) N + t per column of triples [3, n] (non-negative
    # ids), in the columns' lexicographic order, with K and N; None where it
    # does not fit in 63 bits (or there are no columns).
    if not triples.numel():
        return None
    h, r, t = triples
    N = int(torch.maximum(h.max(), t.max())) + 1
    K = int(r.max()) + 1
    if N * N * K >= 2**63:
        return None
    return (h * K + r) * N + t, K, N


def triple_keys(triples: Tensor) -> Tensor:
    r"""One integer per column of :obj:`triples` (shape :obj:`[3, n]`,
    non-negative ids), equal for equal columns and ordered as the columns
    lexicographically: the columns packed where that fits in 63 bits, else
    their rank among the distinct columns."""
    packed = _packed(triples)
    return packed[0] if packed is not None else \
        torch.unique(triples, dim=1, return_inverse=True)[1]


def unique_triples(triples: Tensor) -> Tensor:
    r"""The distinct columns of :obj:`triples` (shape :obj:`[3, n]`,
    non-negative ids), sorted: :obj:`torch.unique(triples, dim=1)`, on one
    packed integer per column where that fits in 63 bits (on millions of
    triples several times faster)."""
    packed = _packed(triples)
    if packed is None:
        return torch.unique(triples, dim=1)
    key, K, N = packed
    key = torch.unique(key)
    return torch.stack([key // (K * N), key // N % K, key % N])


def all_triples(data: Data) -> Tensor:
    r"""All known true triples (every split), as a :obj:`[3, n]` tensor."""
    return torch.cat([split_triples(data, s) for s in SPLITS], dim=1)


def answer_types(data: Data) -> Optional[Tuple[Tensor, Tensor]]:
    r"""The node types of a typed KG (one built from a
    :class:`~torch_geometric.data.HeteroData`): the type of each entity
    (:obj:`data.node_type`, shape :obj:`[N]`) and the type of the answers of
    each query relation :math:`q \in [0, 2R)` (shape :obj:`[2R]`: the
    destination type of relation :math:`q`, the source type of
    :math:`q - R` for an inverse query), from :obj:`data.relation_types`
    (:obj:`[R, 2]`, source and destination type).  :obj:`None` for an
    untyped KG."""
    if 'node_type' not in data or 'relation_types' not in data:
        return None
    types = data.relation_types
    return data.node_type, torch.cat([types[:, 1], types[:, 0]])


def entity_index(data: Data, entity: Union[int, str, Tuple[str, int]]
                 ) -> int:
    r"""The id of :obj:`entity`: an id is kept, a name looked up in
    :obj:`data.entity_names`, a pair :obj:`(node_type, local_id)` (a
    typed KG, e.g. from a :obj:`HeteroData`) read as the
    :obj:`local_id`-th entity of that node type."""
    if isinstance(entity, tuple):
        typed = _node_types(data)
        type_names = [] if typed is None else typed[1]
        if typed is None or len(entity) != 2 or \
                entity[0] not in type_names:
            raise ValueError(f'Unknown entity {entity!r} (a pair is '
                             f'(node type, id) of a typed KG; node types: '
                             f"{', '.join(type_names) or 'none'})")
        members = (typed[0] == type_names.index(entity[0])).nonzero()
        if not 0 <= entity[1] < members.numel():
            raise ValueError(f'Unknown entity {entity!r}: node type '
                             f'{entity[0]!r} has ids in [0, '
                             f'{members.numel()})')
        return int(members[entity[1]])
    if not isinstance(entity, str):
        return entity
    names = getattr(data, 'entity_names', None)
    if names is None or entity not in names:
        raise ValueError(f'Unknown entity {entity!r}')
    return list(names).index(entity)


def _node_types(data: Data) -> Optional[Tuple[Tensor, List[str]]]:
    # The node type of each entity and the types' names of a typed KG, else
    # None.
    type_names = getattr(data, 'node_type_names', None)
    if 'node_type' not in data or not type_names:
        return None
    return data.node_type, list(type_names)


def typed_entity(data: Data, entity: int) -> Optional[Tuple[str, int]]:
    r"""The pair :obj:`(node_type, local_id)` of entity :obj:`entity` in a
    typed KG (the inverse of :func:`entity_index` of a pair); :obj:`None`
    in an untyped one."""
    typed = _node_types(data)
    if typed is None:
        return None
    node_type, type_names = typed
    t = int(node_type[entity])
    return type_names[t], int((node_type[:entity] == t).sum())


def scores_by_node_type(data: Data, scores: Tensor) -> Dict[str, Tensor]:
    r"""Splits scores of every entity, shape :obj:`[..., N]` (what a model
    returns), by node type: :obj:`{node_type: scores[..., entities of that
    type]}`, each of shape :obj:`[..., N_type]` with its entities in local
    id order, as a :obj:`HeteroData` numbers them.  An untyped KG gives one
    entry, :data:`NODE_TYPE`."""
    if scores.size(-1) != data.num_nodes:
        raise ValueError(f"'scores' must have {data.num_nodes} columns (one "
                         f'per entity), got {scores.size(-1)}')
    typed = _node_types(data)
    if typed is None:
        return {NODE_TYPE: scores}
    node_type, type_names = typed[0].to(scores.device), typed[1]
    return {name: scores[..., (node_type == t).nonzero().view(-1)]
            for t, name in enumerate(type_names)}


def relation_index(data: Data, relation: Union[int, str]) -> int:
    r"""The query relation id of :obj:`relation` in :math:`[0, 2R)`: an id
    is kept, a name looked up in :obj:`data.relation_names`
    (:obj:`inv_<name>` for the inverse query)."""
    if not isinstance(relation, str):
        return relation
    names, R = list(getattr(data, 'relation_names', None) or []), \
        int(data.num_relations)
    if relation in names:
        return names.index(relation)
    if relation.startswith('inv_') and relation[4:] in names:
        return names.index(relation[4:]) + R
    raise ValueError(f'Unknown relation {relation!r}')


def check_head_type(data: Data, head: int, relation: int):
    r"""Refuses, in a typed KG (see :func:`answer_types`), a query
    :obj:`(head, relation, ?)` whose head is not of the relation's source
    type (the answer type of its inverse), naming both types."""
    types = answer_types(data)
    if types is None:
        return
    node_type, answer = types
    R = int(data.num_relations)
    expected = int(answer[(relation + R) % (2 * R)])
    found = int(node_type[head])
    if found != expected:
        type_names = getattr(data, 'node_type_names', None) or \
            [str(i) for i in range(int(node_type.max()) + 1)]
        raise ValueError(
            f'entity {data.entity_names[head]!r} is of node type '
            f'{type_names[found]!r}, but the query relation '
            f'{relation_name(data, relation)!r} asks about a '
            f'{type_names[expected]!r}')


def relation_name(data: Data, edge_type: int) -> str:
    r"""The name of edge type :obj:`edge_type` of a KG (see
    :func:`edge_type_name`)."""
    return edge_type_name(data.relation_names, edge_type)


def edge_type_name(relation_names: Sequence[str], edge_type: int) -> str:
    r"""The name of edge type :obj:`edge_type`, with :obj:`inv_` prefixed for
    inverse types :obj:`>= R`, the number of names."""
    R = len(relation_names)
    if edge_type >= R:
        return 'inv_' + relation_names[edge_type - R]
    return relation_names[edge_type]


def _names(names: Optional[Sequence[str]], n: int, prefix: str) -> List[str]:
    if names is None:
        return [f'{prefix}{i}' for i in range(n)]
    names = list(names)
    if len(names) != n:
        raise ValueError(f"Got {len(names)} names for {n} ids")
    return names
