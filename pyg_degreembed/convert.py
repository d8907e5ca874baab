r"""Conversion between the KG :class:`~torch_geometric.data.Data` layout
(:mod:`pyg_degreembed.kg`), plain typed edge lists and
:class:`~torch_geometric.data.HeteroData` (one edge type per relation)."""
from typing import Dict, List, Optional, Sequence

import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData

from .kg import GRAPH_SPLITS, SPLITS, check_shape, kg_data, split_triples

NODE_TYPE = 'entity'


def from_edge_index(
    edge_index: Tensor,
    edge_type: Tensor,
    num_nodes: Optional[int] = None,
    num_relations: Optional[int] = None,
    splits: Optional[Dict[str, Tensor]] = None,
    entity_names: Optional[Sequence[str]] = None,
    relation_names: Optional[Sequence[str]] = None,
) -> Data:
    r"""Builds a KG from typed edges :obj:`edge_index`/:obj:`edge_type`
    (without inverses), taken as the training triples (graph and training
    queries).

    Args:
        edge_index (torch.Tensor): Shape :obj:`[2, E]`.
        edge_type (torch.Tensor): Relation ids, shape :obj:`[E]`.
        num_nodes (int, optional): Default: one more than the largest id.
        num_relations (int, optional): Default: one more than the largest
            relation id.
        splits (Dict[str, torch.Tensor], optional): More triples as
            :obj:`[3, n]` tensors (head, relation, tail) keyed by
            :obj:`"facts"`, :obj:`"valid"` or :obj:`"test"`.
        entity_names (List[str], optional): Entity names.
        relation_names (List[str], optional): Relation names.
    """
    edge_index = torch.as_tensor(edge_index, dtype=torch.long)
    edge_type = torch.as_tensor(edge_type, dtype=torch.long)
    if edge_index.dim() != 2 or edge_index.size(0) != 2 or \
            edge_type.shape != (edge_index.size(1), ):
        raise ValueError(f"Expected 'edge_index' of shape [2, E] and "
                         f"'edge_type' of shape [E], got "
                         f"{list(edge_index.shape)} and "
                         f"{list(edge_type.shape)}")
    splits = dict(splits or {})
    if 'train' in splits:
        raise ValueError("The training triples are 'edge_index' and "
                         "'edge_type'; 'splits' may hold facts, valid, test")
    splits['train'] = torch.stack([edge_index[0], edge_type, edge_index[1]])
    splits = {s: torch.as_tensor(t, dtype=torch.long)
              for s, t in splits.items()}
    for split, triples in splits.items():
        check_shape(split, triples)
    everything = torch.cat(list(splits.values()), dim=1)
    if num_nodes is None:
        num_nodes = int(everything[[0, 2]].max()) + 1 if everything.numel() \
            else 0
    if num_relations is None:
        num_relations = int(everything[1].max()) + 1 if everything.numel() \
            else 0
    return kg_data(num_nodes, num_relations, splits, entity_names,
                   relation_names)


def to_hetero_data(data: Data) -> HeteroData:
    r"""Converts a KG to :class:`~torch_geometric.data.HeteroData` with one
    node type :obj:`"entity"` and one edge type
    :obj:`("entity", relation_name, "entity")` per relation.  Each edge
    type's :obj:`edge_index` is the observed graph (facts and train, no
    inverses); the triples of every split are kept as
    :obj:`{split}_edge_index`."""
    out = HeteroData()
    out[NODE_TYPE].num_nodes = data.num_nodes
    out[NODE_TYPE].names = list(data.entity_names)
    for r, name in enumerate(data.relation_names):
        store = out[NODE_TYPE, name, NODE_TYPE]
        for split in SPLITS:
            triples = split_triples(data, split)
            store[f'{split}_edge_index'] = triples[[0, 2]][:, triples[1] == r]
        store.edge_index = torch.cat(
            [store[f'{s}_edge_index'] for s in GRAPH_SPLITS], dim=1)
    return out


def from_hetero_data(data: HeteroData) -> Data:
    r"""Converts :class:`~torch_geometric.data.HeteroData` to a KG.  Every
    node type becomes a block of entities (named :obj:`node_type/i`, or by
    the store's :obj:`names` for a single node type), and every edge type a
    relation named by its middle part (or :obj:`src__rel__dst` when that is
    ambiguous).  If the edge stores hold :obj:`{split}_edge_index` (as
    :func:`to_hetero_data` writes), those are the splits; otherwise every
    :obj:`edge_index` is taken as training triples."""
    offsets, names = {}, []
    for node_type in data.node_types:
        offsets[node_type] = len(names)
        n = data[node_type].num_nodes
        store_names = getattr(data[node_type], 'names', None)
        if len(data.node_types) == 1 and store_names is not None:
            names.extend(store_names)
        else:
            names.extend(f'{node_type}/{i}' for i in range(n))
    relations = [edge_type[1] for edge_type in data.edge_types]
    if len(set(relations)) != len(relations):
        relations = ['__'.join(edge_type) for edge_type in data.edge_types]

    has_splits = any(f'{s}_edge_index' in data[et] for et in data.edge_types
                     for s in SPLITS)
    splits: Dict[str, List[Tensor]] = {s: [] for s in SPLITS}
    for r, (src, rel, dst) in enumerate(data.edge_types):
        store = data[src, rel, dst]
        keys = [(s, f'{s}_edge_index') for s in SPLITS] if has_splits \
            else [('train', 'edge_index')]
        for split, key in keys:
            if key not in store:
                continue
            edge_index = store[key]
            splits[split].append(torch.stack([
                edge_index[0] + offsets[src],
                torch.full_like(edge_index[0], r),
                edge_index[1] + offsets[dst],
            ]))
    triples = {s: torch.cat(v, dim=1) for s, v in splits.items() if v}
    return kg_data(len(names), len(relations), triples, names, relations)
