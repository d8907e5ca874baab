r"""The graph a model reasons on, from whatever a PyG user passes
(:obj:`edge_index`/:obj:`edge_type`, a :obj:`Data`, a :obj:`HeteroData`, a
PyG KG dataset), prepared once as a :class:`~pyg_degreembed.TypedGraph` and
cached.

The cache is keyed on the identity and version counter of the input tensors:
passing the same tensors again (unchanged) returns the prepared graph at once;
a new tensor, or one changed in place, is prepared anew.  An entry is dropped
when its tensors are freed, so the cache never keeps a graph alive."""
import weakref
from collections import OrderedDict
from typing import Any, Callable, List, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.data import Data, Dataset
from torch_geometric.utils.num_nodes import maybe_num_nodes

from pyg_degreembed.data.convert import as_kg
from pyg_degreembed.data.kg import add_inverse_edges, index_tensor
from pyg_degreembed.data.typed_graph import TypedGraph, check_edge_shapes


class GraphCache:
    r"""A small cache of prepared graphs keyed on input tensors."""
    def __init__(self, size: int = 8):
        self.size = size
        self._entries: 'OrderedDict[tuple, tuple]' = OrderedDict()

    def get(self, tensors: List[Tensor], extra: tuple,
            build: Callable[[], Any]) -> Any:
        key = tuple((id(t), t._version) for t in tensors) + extra
        entry = self._entries.get(key)
        if entry is not None and all(ref() is t
                                     for ref, t in zip(entry[0], tensors)):
            self._entries.move_to_end(key)
            return entry[1]
        value = build()
        self._entries[key] = ([weakref.ref(t) for t in tensors], value)
        if tensors:
            weakref.finalize(tensors[0], self._entries.pop, key, None)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return value

    def clear(self):
        self._entries.clear()


#: The cache of :func:`resolve_graph`.
graph_cache = GraphCache()


def resolve_graph(edge_index: Any, edge_type: Optional[Tensor] = None,
                  num_nodes: Optional[int] = None, *, num_relations: int,
                  device: Optional[torch.device] = None,
                  owner: Optional[str] = None) -> TypedGraph:
    r"""The :class:`~pyg_degreembed.TypedGraph` (with :math:`2R` edge
    types, inverses included) that a model of :math:`R` relations reasons
    on.

    Args:
        edge_index: One of

            * a tensor of shape :obj:`[2, E]`, with :obj:`edge_type`
              (:obj:`[E]`) and optionally :obj:`num_nodes`: typed edges.
              If every type is below :math:`R` they are the KG's triples and
              the inverse edges (type :obj:`r + R`) are added; otherwise
              the inverse edges must be there already (as in
              :class:`~torch_geometric.datasets.RelLinkPredDataset`), and
              each must match its edge;
            * a plain :obj:`Data` with :obj:`edge_index`/:obj:`edge_type`:
              the same;
            * a KG in any layout :func:`~pyg_degreembed.as_kg` reads (the
              library's, PyG's KG datasets, :obj:`HeteroData`): its
              observed graph (never valid/test triples); it must have
              :math:`R` relations;
            * a :class:`~pyg_degreembed.TypedGraph`: used as it is.
        num_relations (int): :math:`R`, the model's number of relations.
        device (torch.device, optional): Where the graph is needed.
            (default: where the input is)
        owner (str, optional): What reads the graph, for messages: a
            layer speaks of edge types (:obj:`"this DegreeEmbedding"`).
            (default: :obj:`None`, a model of :math:`R` relations)
    """
    if isinstance(edge_index, TypedGraph):
        if edge_index.num_edge_types != 2 * num_relations:
            raise ValueError(
                f'The graph has {edge_index.num_edge_types} edge types, but '
                f'{built_for(num_relations, owner)}')
        if device is None or edge_index.device == torch.device(device):
            return edge_index
        return graph_cache.get([edge_index.edge_src], (str(device), ),
                               lambda: edge_index.to(device))
    if isinstance(edge_index, Tensor) or edge_index is None:
        if edge_type is None:
            raise TypeError("'edge_type' is needed with an 'edge_index' "
                            "tensor")
        return _from_edges(edge_index, edge_type, num_nodes, num_relations,
                           device, owner)
    if edge_type is not None:
        raise TypeError(f"'edge_type' is only taken with an 'edge_index' "
                        f"tensor, not with a {type(edge_index).__name__}")
    if isinstance(edge_index, Data) and not _is_kg_layout(edge_index):
        return _from_edges(edge_index.edge_index, edge_index.edge_type,
                           edge_index.num_nodes, num_relations, device,
                           owner)
    tensors = _tensors_of(edge_index)

    def build():
        kg = as_kg(edge_index)
        check_relations(kg.num_relations, num_relations, owner)
        graph = TypedGraph(kg.edge_index, kg.edge_type, kg.num_nodes,
                           2 * num_relations)
        return graph if device is None else graph.to(device)

    return graph_cache.get(tensors, ('kg', num_relations, str(device)),
                           build)


def built_for(num_relations: int, owner: Optional[str] = None) -> str:
    r"""What a graph must fit, for messages: a model of :math:`R` relations,
    or (:obj:`owner`, a layer) :math:`2R` edge types."""
    R = num_relations
    if owner is None:
        return f'the model was built for {R} relations ({2 * R} edge types ' \
            'with inverses)'
    return f'{owner} was built for {2 * R} edge types ({R} relations and ' \
        'their inverses)'


def check_relations(kg_relations: int, num_relations: int,
                    owner: Optional[str] = None):
    r"""Refuses a KG whose number of relations is not the model's."""
    if kg_relations != num_relations and owner is not None:
        raise ValueError(f'The KG has {kg_relations} relations '
                         f'({2 * kg_relations} edge types with inverses), '
                         f'but {built_for(num_relations, owner)}')
    if kg_relations != num_relations:
        hint = (' (PyG\'s RelLinkPredDataset.num_relations counts the '
                'inverse relations: build the model with '
                'as_kg(data).num_relations)'
                if kg_relations * 2 == num_relations else
                ' (to reason on another KG whose relations the model knows, '
                'renumber them by name: align_relations(kg, '
                'training_kg.relation_names))')
        raise ValueError(f'The KG has {kg_relations} relations, but the '
                         f'model was built for {num_relations}{hint}')


def _is_kg_layout(data: Data) -> bool:
    return any(key in data for key in ('num_relations', 'train_edge_index',
                                       'train_mask'))


def _tensors_of(obj: Any) -> List[Tensor]:
    if isinstance(obj, (list, tuple)):
        return [t for item in obj for t in _tensors_of(item)]
    if isinstance(obj, Dataset):
        obj = obj[0]
    return [value for store in obj.stores for value in store.values()
            if isinstance(value, Tensor)]


def _from_edges(edge_index, edge_type, num_nodes: Optional[int],
                num_relations: int, device, owner=None) -> TypedGraph:
    edge_index = index_tensor(edge_index, 'edge_index')
    edge_type = index_tensor(edge_type, 'edge_type')
    return graph_cache.get(
        [edge_index, edge_type], ('edges', num_nodes, num_relations,
                                  str(device)),
        lambda: _build_from_edges(edge_index, edge_type, num_nodes,
                                  num_relations, device, owner))


def _build_from_edges(edge_index: Tensor, edge_type: Tensor,
                      num_nodes: Optional[int], num_relations: int,
                      device, owner=None) -> TypedGraph:
    R = num_relations
    check_edge_shapes(edge_index, edge_type)
    num_nodes = maybe_num_nodes(edge_index, num_nodes)
    if edge_type.numel() and int(edge_type.max()) >= R:
        _check_inverses(edge_index, edge_type, num_nodes, R, owner)
    else:
        _refuse_doubled(edge_index, edge_type, num_nodes, R, owner)
        edge_index, edge_type = add_inverse_edges(edge_index, edge_type, R)
    graph = TypedGraph(edge_index, edge_type, num_nodes, 2 * R)
    return graph if device is None else graph.to(device)


def _keys(edge_index: Tensor, edge_type: Tensor, num_nodes: int,
          num_types: int) -> Tuple[Tensor, Tensor]:
    r"""Sorted keys of the edges and of their inverses (type shifted by
    half of :obj:`num_types`)."""
    src, dst = edge_index
    flipped = (edge_type + num_types // 2) % num_types
    key = (src * num_types + edge_type) * num_nodes + dst
    inv = (dst * num_types + flipped) * num_nodes + src
    return torch.sort(key).values, torch.sort(inv).values


def _check_inverses(edge_index, edge_type, num_nodes: int, R: int,
                    owner=None):
    if int(edge_type.min()) < 0 or int(edge_type.max()) >= 2 * R:
        raise ValueError(f"'edge_type' holds types in "
                         f"[{int(edge_type.min())}, {int(edge_type.max())}],"
                         f" outside [0, {2 * R}): "
                         f"{built_for(R, owner)}")
    key, inv = _keys(edge_index, edge_type, num_nodes, 2 * R)
    if not torch.equal(key, inv):
        raise ValueError(
            f"'edge_type' holds types >= {R} ("
            + ("the model's number of relations" if owner is None else
               f"half of {owner}'s {2 * R} edge types")
            + f"), so the graph is read as holding its inverse edges "
            f"already (type r + {R} for r), but they do not match its "
            f"edges; pass the KG's triples (types < {R}) and the inverses "
            f"are added")


def _refuse_doubled(edge_index, edge_type, num_nodes: int, R: int,
                    owner=None):
    # A graph that already holds inverses typed r + R/2 (the usual mistake:
    # a model built with RelLinkPredDataset.num_relations) would silently
    # get a second set of inverses.
    if R % 2 or edge_type.numel() == 0 or int(edge_type.min()) < 0:
        return
    key, inv = _keys(edge_index, edge_type, num_nodes, R)
    if torch.equal(key, inv) and bool((edge_type >= R // 2).any()):
        raise ValueError(
            f'The graph already holds inverse edges for {R // 2} relations '
            f'(type r + {R // 2} is the inverse of r), but '
            f'{built_for(R, owner)}; build it with {R // 2} relations (PyG\'s '
            f'RelLinkPredDataset.num_relations counts the inverse relations)')
