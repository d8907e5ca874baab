r"""Conversion between the KG :class:`~torch_geometric.data.Data` layout
(:mod:`pyg_degreembed.data.kg`), plain typed edge lists,
:class:`~torch_geometric.data.HeteroData` (one edge type per relation) and
the layouts of PyG's own KG datasets (:func:`as_kg`)."""
import os.path as osp
from typing import Any, Dict, List, Optional, Sequence, Set

import torch
from torch import Tensor
from torch_geometric.data import Data, Dataset, HeteroData

from pyg_degreembed.data.kg import (GRAPH_SPLITS, NODE_TYPE, SPLITS,
                                    check_shape, index_tensor, kg_data,
                                    split_triples)


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
    edge_index = index_tensor(edge_index, 'edge_index')
    edge_type = index_tensor(edge_type, 'edge_type')
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
    splits = {s: index_tensor(t, f'{s} triples') for s, t in splits.items()}
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
    r"""Converts a KG to :class:`~torch_geometric.data.HeteroData`: one
    node type per node type of a typed KG (:obj:`node_type`,
    :obj:`node_type_names`, :obj:`relation_types`, as
    :func:`from_hetero_data` or a folder with :obj:`entity_types.txt` give
    it; the entities of a type numbered in their order, their names in
    :obj:`names`), else the one node type :obj:`"entity"`; one edge type
    :obj:`(source type, relation_name, destination type)` per relation.
    Each edge type's :obj:`edge_index` is the observed graph (facts and
    train, no inverses); the triples of every split are kept as
    :obj:`{split}_edge_index`.  :func:`from_hetero_data` reads it back as
    the same KG where the entities are grouped by type."""
    out = HeteroData()
    typed = 'node_type' in data and 'relation_types' in data
    if typed:
        node_type = data.node_type.cpu()
        type_names = list(getattr(data, 'node_type_names', None) or [
            f'type{t}' for t in range(int(node_type.max()) + 1)])
        types = data.relation_types.cpu().tolist()
    else:
        node_type = torch.zeros(data.num_nodes, dtype=torch.long)
        type_names, types = [NODE_TYPE], [[0, 0]] * data.num_relations
    local = torch.zeros(data.num_nodes, dtype=torch.long)
    for t, type_name in enumerate(type_names):
        members = (node_type == t).nonzero().view(-1)
        local[members] = torch.arange(members.numel())
        out[type_name].num_nodes = members.numel()
        out[type_name].names = [data.entity_names[i]
                                for i in members.tolist()]
    for r, name in enumerate(data.relation_names):
        src, dst = (type_names[t] for t in types[r])
        store = out[src, name, dst]
        for split in SPLITS:
            triples = split_triples(data, split)
            store[f'{split}_edge_index'] = \
                local[triples[[0, 2]][:, triples[1] == r]]
        store.edge_index = torch.cat(
            [store[f'{s}_edge_index'] for s in GRAPH_SPLITS], dim=1)
    return out


def from_hetero_data(data: HeteroData) -> Data:
    r"""Converts :class:`~torch_geometric.data.HeteroData` to a KG.  Every
    node type becomes a block of entities (named :obj:`node_type/i`, or
    :obj:`node_type/name` by the store's :obj:`names`, just :obj:`name` for
    a single node type), and every edge type a
    relation named by its middle part (or :obj:`src__rel__dst` when that is
    ambiguous).  Per edge type: its :obj:`{split}_edge_index` keys hold its
    triples of each split; if it has :obj:`facts_edge_index` or
    :obj:`train_edge_index` (as :func:`to_hetero_data` writes), its
    :obj:`edge_index` must be their union; otherwise its :obj:`edge_index`
    holds its training triples (so a store with :obj:`edge_index` and
    :obj:`test_edge_index` keeps both).  Refused, naming the problem: a
    store without any, a graph without node types, an edge type whose node
    type has no store or no :obj:`num_nodes`, a node id outside
    :math:`[0, n)` of its node type, :obj:`names` that are not :math:`n`
    unique strings, and relation names starting with :obj:`inv_` (reserved
    for inverse relations), as the file readers refuse theirs.  The KG keeps
    the node types (:obj:`node_type`, :obj:`node_type_names`, and
    :obj:`relation_types`, each relation's source and destination type), so
    that answers are ranked among entities of the right type
    (:func:`~pyg_degreembed.data.kg.answer_types`) and a head of the wrong
    type is refused (:func:`~pyg_degreembed.data.kg.check_head_type`)."""
    if not data.node_types:
        raise ValueError('The HeteroData has no node type (set '
                         "data['entity'].num_nodes)")
    offsets: Dict[str, int] = {}
    sizes: Dict[str, int] = {}
    names: List[str] = []
    for node_type in data.node_types:
        offsets[node_type] = len(names)
        n = data[node_type].num_nodes
        if n is None:
            raise ValueError(f"The node type {node_type!r} has no number of "
                             f"nodes (set data[{node_type!r}].num_nodes)")
        sizes[node_type] = n
        store_names = getattr(data[node_type], 'names', None)
        if store_names is not None:
            _check_node_names(store_names, n, node_type)
        if len(data.node_types) == 1 and store_names is not None:
            names.extend(store_names)
        elif store_names is not None:  # (prefixed once)
            names.extend(name if name.startswith(f'{node_type}/') else
                         f'{node_type}/{name}' for name in store_names)
        else:
            names.extend(f'{node_type}/{i}' for i in range(n))
    if len(set(names)) != len(names):
        raise ValueError('The node names of the HeteroData are not unique '
                         'once prefixed with their node type')
    for edge_type in data.edge_types:
        for node_type in (edge_type[0], edge_type[2]):
            if node_type not in offsets:
                raise ValueError(
                    f'The edge type {edge_type} names the node type '
                    f'{node_type!r}, which has no node store (set '
                    f'data[{node_type!r}].num_nodes)')
        if edge_type[1].startswith('inv_'):
            raise ValueError(f'The edge type {edge_type}: relation names '
                             "starting with 'inv_' are reserved for inverse "
                             'relations')
    relations = [edge_type[1] for edge_type in data.edge_types]
    if len(set(relations)) != len(relations):
        relations = ['__'.join(edge_type) for edge_type in data.edge_types]

    splits: Dict[str, List[Tensor]] = {s: [] for s in SPLITS}
    for r, (src, rel, dst) in enumerate(data.edge_types):
        store = data[src, rel, dst]
        keys = [(s, f'{s}_edge_index') for s in SPLITS
                if f'{s}_edge_index' in store]
        if any(s in GRAPH_SPLITS for s, _ in keys):
            if 'edge_index' in store:
                _check_observed(store, (src, rel, dst))
        elif 'edge_index' in store:
            keys.append(('train', 'edge_index'))
        elif not keys:
            raise ValueError(f'The edge type {(src, rel, dst)} has no '
                             "'edge_index'")
        for split, key in keys:
            edge_index = index_tensor(store[key], f'{(src, rel, dst)} {key}')
            if edge_index.dim() != 2 or edge_index.size(0) != 2:
                raise ValueError(f"The {key} of {(src, rel, dst)} must have "
                                 f"shape [2, E], got "
                                 f"{list(edge_index.shape)}")
            for row, node_type in enumerate((src, dst)):
                _check_node_ids(edge_index[row], sizes[node_type],
                                f'{(src, rel, dst)} {key}[{row}]',
                                node_type)
            splits[split].append(torch.stack([
                edge_index[0] + offsets[src],
                torch.full_like(edge_index[0], r),
                edge_index[1] + offsets[dst],
            ]))
    triples = {s: torch.cat(v, dim=1) for s, v in splits.items() if v}
    kg = kg_data(len(names), len(relations), triples, names, relations)
    # The node types, for typed ranking (kg.answer_types).
    type_id = {node_type: i for i, node_type in enumerate(data.node_types)}
    kg.node_type = torch.cat([
        torch.full((data[node_type].num_nodes, ), i, dtype=torch.long)
        for node_type, i in type_id.items()])
    kg.node_type_names = list(data.node_types)
    kg.relation_types = torch.tensor(
        [[type_id[src], type_id[dst]] for src, _, dst in data.edge_types],
        dtype=torch.long).view(-1, 2)
    return kg


def _check_node_names(names: Any, n: int, node_type: str):
    # A node store's names: n unique strings.
    if isinstance(names, str) or not hasattr(names, '__len__') or \
            len(names) != n:
        raise ValueError(f'data[{node_type!r}].names must be a list of '
                         f'{n} names (one per node)')
    bad = next((name for name in names if not isinstance(name, str)), None)
    if bad is not None:
        raise ValueError(f'data[{node_type!r}].names must hold strings, got '
                         f'{bad!r}')
    seen: Set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f'data[{node_type!r}].names holds {name!r} '
                             'twice')
        seen.add(name)


def _check_node_ids(ids: Tensor, n: int, where: str, node_type: str):
    # Node ids within their node type's [0, n).
    bad = ((ids < 0) | (ids >= n)).nonzero().view(-1)
    if bad.numel():
        raise ValueError(f'{where}: node id {int(ids[bad[0]])} is outside '
                         f'[0, {n}) of node type {node_type!r} (column '
                         f'{int(bad[0])})')


def _check_observed(store, edge_type):
    # With facts/train keys, edge_index must be their union.
    observed = [store[f'{s}_edge_index'] for s in GRAPH_SPLITS
                if f'{s}_edge_index' in store]
    expected = torch.cat(observed, dim=1) if observed else \
        torch.empty(2, 0, dtype=torch.long)
    both = torch.cat([index_tensor(store.edge_index, 'edge_index'),
                      index_tensor(expected, 'edge_index')], dim=1)
    size = int(both.max()) + 1 if both.numel() else 1
    a = torch.sort(store.edge_index[0].long() * size +
                   store.edge_index[1].long()).values
    b = torch.sort(expected[0].long() * size + expected[1].long()).values
    if not torch.equal(a, b):
        raise ValueError(
            f"The edge type {edge_type} has facts/train split keys and an "
            f"'edge_index' that is not their union; put every triple under "
            f"a split key (or drop the facts/train keys)")


def as_kg(kg: Any) -> Data:
    r"""Returns any supported knowledge graph in the library's layout
    (:mod:`pyg_degreembed.data.kg`); :func:`~pyg_degreembed.fit`,
    :func:`~pyg_degreembed.evaluate` and the models call it on what they are
    given.  Accepted, and how each is read:

    * a :obj:`Data` in the library's layout (:obj:`facts_edge_index`, ...,
      :obj:`num_relations`): returned as it is;
    * the layout of :class:`torch_geometric.datasets.RelLinkPredDataset`
      (:obj:`{train,valid,test}_edge_index`/:obj:`_edge_type`, and
      :obj:`edge_index`/:obj:`edge_type` holding the training triples and
      their inverses typed :obj:`r + R`): the splits are kept and the
      graph is the training triples.  Note that the dataset's
      :obj:`num_relations` counts the inverse relations (:math:`2R`); the
      result's :obj:`num_relations` is :math:`R`;
    * the layout of :class:`torch_geometric.datasets.WordNet18RR` (one graph
      with :obj:`train_mask`, :obj:`val_mask`, :obj:`test_mask`): the masked
      edges are the train, valid and test triples; only the training
      triples become graph edges;
    * a sequence :obj:`(train, valid, test)` of :obj:`Data` (or datasets),
      each with :obj:`edge_index`/:obj:`edge_type` in one id space, as
      :class:`torch_geometric.datasets.FB15k_237` gives one per split;
    * any other :obj:`Data` with :obj:`edge_index`/:obj:`edge_type` (no
      inverses): its edges are the training triples
      (:func:`from_edge_index`);
    * a :class:`~torch_geometric.data.HeteroData` (:func:`from_hetero_data`);
    * a dataset holding one graph (its :obj:`[0]`).  Names are taken from
      it where it has them: :obj:`entities.dict`/:obj:`relations.dict` of a
      :class:`~torch_geometric.datasets.RelLinkPredDataset`, the
      :obj:`edge2id` of :class:`~torch_geometric.datasets.WordNet18RR`.

    Without a :obj:`facts` split every training triple is both a graph edge
    and a training query; each query never sees its own edge (see
    :func:`~pyg_degreembed.fit`).  Relations are numbered by their
    :obj:`edge_type` ids, :math:`R` is one more than the largest id used.
    """
    if isinstance(kg, (list, tuple)):
        return _from_split_graphs(kg)
    names: Dict[str, List[str]] = {}
    if isinstance(kg, Dataset):
        if len(kg) != 1:
            raise ValueError(f'{kg} holds {len(kg)} graphs; a knowledge graph '
                             'dataset holds one (pass a sequence (train, '
                             'valid, test) for one dataset per split)')
        names = _dataset_names(kg)
        kg = kg[0]
    if isinstance(kg, HeteroData):
        return from_hetero_data(kg)
    if not isinstance(kg, Data):
        raise TypeError(f'Expected a knowledge graph (Data, HeteroData, a '
                        f'dataset or (train, valid, test)), got '
                        f'{type(kg).__name__}')
    if 'facts_edge_index' in kg and 'num_relations' in kg:
        return kg
    for key in ('edge_index', 'edge_type'):
        if key not in kg and 'train_edge_index' not in kg:
            raise ValueError(f"The graph has no '{key}'")
    if 'train_edge_index' in kg:
        splits = {s: _triples(kg[f'{s}_edge_index'], kg[f'{s}_edge_type'],
                              f'{s}_edge_index')
                  for s in ('train', 'valid', 'test')
                  if f'{s}_edge_index' in kg}
    elif 'train_mask' in kg:
        triples = _triples(kg.edge_index, kg.edge_type, 'edge_index')
        splits = {s: triples[:, kg[f'{m}_mask']] for s, m in
                  (('train', 'train'), ('valid', 'val'), ('test', 'test'))
                  if f'{m}_mask' in kg}
    else:
        splits = {'train': _triples(kg.edge_index, kg.edge_type,
                                    'edge_index')}
    return _kg_from_splits(splits, kg.num_nodes, names)


def _triples(edge_index, edge_type, name: str) -> Tensor:
    edge_index = index_tensor(edge_index, name)
    edge_type = index_tensor(edge_type, name.replace('index', 'type'))
    if edge_index.dim() != 2 or edge_index.size(0) != 2 or \
            edge_type.shape != (edge_index.size(1), ):
        raise ValueError(f"Expected '{name}' of shape [2, E] and its edge "
                         f"types of shape [E], got {list(edge_index.shape)} "
                         f"and {list(edge_type.shape)}")
    return torch.stack([edge_index[0], edge_type, edge_index[1]])


def _from_split_graphs(graphs: Sequence) -> Data:
    if len(graphs) != 3:
        raise ValueError(f'Expected the graphs (train, valid, test), got '
                         f'{len(graphs)}')
    graphs = [g[0] if isinstance(g, Dataset) else g for g in graphs]
    splits = {s: _triples(g.edge_index, g.edge_type, f'{s} edge_index')
              for s, g in zip(('train', 'valid', 'test'), graphs)}
    num_nodes = max(g.num_nodes or 0 for g in graphs)
    return _kg_from_splits(splits, num_nodes, {})


def _kg_from_splits(splits: Dict[str, Tensor], num_nodes: Optional[int],
                    names: Dict[str, List[str]]) -> Data:
    everything = torch.cat(list(splits.values()), dim=1)
    num_relations = int(everything[1].max()) + 1 if everything.numel() else 0
    relation_names = names.get('relations')
    if relation_names is not None:
        num_relations = max(num_relations, len(relation_names))
    if num_nodes is None:
        num_nodes = int(everything[[0, 2]].max()) + 1 \
            if everything.numel() else 0
    entity_names = names.get('entities')
    if entity_names is not None and len(entity_names) != num_nodes:
        entity_names = None
    if relation_names is not None and len(relation_names) != num_relations:
        relation_names = None
    return kg_data(num_nodes, num_relations, splits, entity_names,
                   relation_names)


def _dataset_names(dataset: Dataset) -> Dict[str, List[str]]:
    r"""Entity and relation names a PyG dataset keeps (id order)."""
    names = {}
    edge2id = getattr(type(dataset), 'edge2id', None)
    if isinstance(edge2id, dict):
        names['relations'] = sorted(edge2id, key=lambda r: edge2id[r])
    raw_dir = getattr(dataset, 'raw_dir', None)
    for kind in ('entities', 'relations'):
        path = osp.join(raw_dir, f'{kind}.dict') if raw_dir else None
        if path and osp.isfile(path):
            ids = {}
            with open(path, encoding='utf-8') as f:
                for line in f:
                    fields = line.rstrip('\r\n').split('\t')
                    if len(fields) == 2 and fields[0].isdigit():
                        ids[int(fields[0])] = fields[1]
            if sorted(ids) == list(range(len(ids))):
                names[kind] = [ids[i] for i in range(len(ids))]
    return names


def align_relations(kg: Any, relation_names: Sequence[str]) -> Data:
    r"""Returns a KG with its relations renumbered to the ids of
    :obj:`relation_names`, matched by name: a model trained on one KG
    reasons on another (new entities, new graph) whose relations it knows,
    whatever their order, and relations the model knows that the KG lacks
    simply have no edges.  Entities, splits and the source are kept.

    .. code-block:: python

        model = DegreEmbedReasoner(train_kg.num_relations)
        fit(model, train_kg)
        new_kg = align_relations(load_neural_lp('grail/fb237_v1_ind'),
                                 train_kg.relation_names)
        evaluate(model, new_kg)

    Args:
        kg: The KG to reason on, in any layout :func:`as_kg` reads.
        relation_names (Sequence[str]): The model's relations, in the order
            of their ids (the training KG's :obj:`relation_names`).

    Raises:
        ValueError: If the KG has a relation not in :obj:`relation_names`
            (named in the message).
    """
    kg = as_kg(kg)
    relation_names = list(relation_names)
    ids = {name: i for i, name in enumerate(relation_names)}
    if len(ids) != len(relation_names):
        raise ValueError('The relation names to align to are not unique')
    unknown = [name for name in kg.relation_names if name not in ids]
    if unknown:
        where = f" of {kg.source}" if 'source' in kg else ''
        more = f' (and {len(unknown) - 1} more)' if len(unknown) > 1 else ''
        raise ValueError(
            f'relation {unknown[0]!r}{where} is not one the model knows'
            f'{more}; the model was trained on {len(relation_names)} '
            f"relations ({', '.join(relation_names[:3])}"
            f"{', ...' if len(relation_names) > 3 else ''})")
    new_id = torch.tensor([ids[name] for name in kg.relation_names],
                          dtype=torch.long)
    splits = {}
    for split in SPLITS:
        triples = split_triples(kg, split).clone()
        triples[1] = new_id[triples[1]]
        splits[split] = triples
    out = kg_data(kg.num_nodes, len(relation_names), splits,
                  kg.entity_names, relation_names)
    if 'source' in kg:
        out.source = kg.source
    return out
