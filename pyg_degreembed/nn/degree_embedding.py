import math
import weakref
from contextlib import contextmanager
from typing import Any, Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import LSTM, Embedding, Linear, Module
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence

from pyg_degreembed.data.features import (DegreeSets, PrefixTrie, extend_trie,
                                          reverse_padded)
from pyg_degreembed.data.kg import (MAX_CHANNELS, check_at_most,
                                    check_positive_ints, index_tensor)
from pyg_degreembed.data.resolve import resolve_graph
from pyg_degreembed.data.typed_graph import SourceWeights, TypedGraph
from pyg_degreembed.nn.trie_lstm import TrieLSTM


#: The trie nodes (both directions) that one call of the degree embedding
#: reads at once at most, about: above it, the sets are embedded in parts
#: and a training step gives gradients to a sample of them (see
#: :attr:`DegreeEmbedding.history`).  A node keeps :math:`7d`
#: floats for the backward pass (0.9 GB for this many at :math:`d = 128`);
#: FB15k-237's batches read about 160k.
MAX_TRIE_NODES = 2 ** 18


class DegreeEmbedding(Module):
    r"""The degree embedding from the "DegreEmbed: incorporating entity
    embedding into logic rule learning for knowledge graph reasoning" paper
    (Li et al.).

    Each entity :math:`e` is described by the sorted set
    :math:`\mathcal{D}(e) = (k_1, \ldots, k_d)` of edge types that leave it
    (see :func:`~pyg_degreembed.data.features.degree_sets`).  The set is
    embedded
    token by token, read by a bidirectional LSTM, and turned into one weight
    per edge type:

    .. math::
        \mathbf{H}_e &= \left[ \overrightarrow{\mathbf{h}}_d \,\|\,
        \overleftarrow{\mathbf{h}}_1 \right], \quad
        (\overrightarrow{\mathbf{h}}, \overleftarrow{\mathbf{h}}) =
        \mathrm{BiLSTM}(\mathbf{E}_{k_1}, \ldots, \mathbf{E}_{k_d})

        \rho_e &= \mathrm{softmax}(\mathbf{W} \mathbf{H}_e + \mathbf{b})
        \in \mathbb{R}^{K}

    An edge :math:`e \xrightarrow{k} j` of the DegreEmbed operator
    :math:`\mathbf{B}_k` then carries :math:`\rho_{e,k}` (the row of the
    *source* entity is scaled), for inverse edge types too.  Entities with no
    edges read a dedicated "no edges" token.

    The BiLSTM is an ordinary :class:`torch.nn.LSTM`, evaluated exactly
    without padding.  On the CPU it does not repeat work either: the forward
    direction reads each distinct prefix of the (sorted) degree-type
    sequences once, the backward direction each distinct suffix once, and
    the input projection is looked up per token (there are only
    :math:`K + 1` tokens); on Family this reads 7.6k prefixes instead of 19k
    tokens.  On a GPU the LSTM runs on the packed sequences (cuDNN).

    Args:
        num_edge_types (int): The number :math:`K` of edge types (:math:`2R`
            with inverse relations).
        embedding_dim (int, optional): Size :math:`m` of the degree-type
            embeddings. (default: :obj:`128`)
        hidden_channels (int, optional): Hidden size :math:`d` of each LSTM
            direction. (default: :obj:`128`)
        dropout (float, optional): Dropout probability on
            :math:`\mathbf{H}_e` during training (a regulariser: with one
            degree-type set per entity, as on Kinship, :math:`\rho` can
            otherwise fit each entity's training queries).
            (default: :obj:`0.0`)

    Used on its own it takes the graph the PyG way, :obj:`rho =
    layer(edge_index, edge_type)` (or :obj:`layer(data)`, see
    :meth:`forward`); handed to a :class:`~pyg_degreembed.RuleReasoner` as
    its :obj:`edge_weight` it makes DegreEmbed.

    Shapes:
        - **input:** edge indices :math:`(2, E)` and edge types :math:`(E)`
          of a graph of :math:`N` entities, or a graph object
        - **output:** :math:`\rho` of shape :math:`(N, K)`, rows summing to 1
    """
    def __init__(self, num_edge_types: int, embedding_dim: int = 128,
                 hidden_channels: int = 128, dropout: float = 0.0):
        super().__init__()
        if not 0 <= dropout < 1:
            raise ValueError(f"'dropout' must be in [0, 1), got {dropout!r}")
        check_positive_ints(num_edge_types=num_edge_types)
        check_at_most(MAX_CHANNELS, '', embedding_dim=embedding_dim,
                      hidden_channels=hidden_channels)
        self.num_edge_types = num_edge_types
        self.embedding_dim = embedding_dim
        self.hidden_channels = hidden_channels
        self.dropout = dropout
        # Token num_edge_types is the "no edges" token.
        self.embedding = Embedding(num_edge_types + 1, embedding_dim)
        self.lstm = LSTM(embedding_dim, hidden_channels, batch_first=True,
                         bidirectional=True)
        self.lin = Linear(2 * hidden_channels, num_edge_types)
        self._history: Tuple[Any, Optional[Tensor]] = (None, None)
        self.reset_parameters()

    def reset_parameters(self):
        self.embedding.reset_parameters()
        self.lstm.reset_parameters()
        self.lin.reset_parameters()

    def embed_sets(self, degree: DegreeSets, sets: Optional[Tensor] = None,
                   changed: Optional[Tuple[Tensor, Tensor, Tensor]] = None
                   ) -> Tensor:
        r"""The embedding :math:`\mathbf{H}` of unique degree-type sets.

        On the CPU the BiLSTM reads the tries of :obj:`degree` (each distinct
        prefix and suffix once, see
        :class:`~pyg_degreembed.nn.trie_lstm.TrieLSTM`); on a GPU it is one
        call of :class:`torch.nn.LSTM` on the packed sequences (cuDNN runs
        all steps in a few kernels, where the trie takes a dozen small
        kernels per trie level), in IEEE float32 (not TF32) so that the
        values equal the CPU's.  Both compute the same function.

        Args:
            degree (DegreeSets): The degree-type sets of the graph.
            sets (torch.Tensor, optional): Ids of the sets to embed (rows of
                :obj:`degree.tokens`). (default: :obj:`None`, all)
            changed (Tuple[torch.Tensor, ...], optional): Further sets
                :obj:`(base, rows, lengths)` as
                returned by :meth:`TypedGraph.degree_without` (the set of
                :obj:`degree` each comes from, its tokens padded as
                :obj:`degree.tokens`, its length), embedded after
                :obj:`sets`. (default: :obj:`None`)

        :rtype: :class:`torch.Tensor` of shape :obj:`[len(sets) + M, 2d]`
        """
        if int(degree.tokens.max()) > self.num_edge_types:
            raise ValueError(
                f'Degree sets hold edge types up to '
                f'{int(degree.tokens.max())}, but this {self} was built for '
                f'{self.num_edge_types} edge types')
        if sets is None:
            sets = torch.arange(degree.tokens.size(0),
                                device=degree.tokens.device)
        if degree.tokens.is_cuda:
            tokens, lengths = degree.tokens[sets], degree.lengths[sets]
            if changed is not None:
                tokens = torch.cat([tokens, changed[1]])
                lengths = torch.cat([lengths, changed[2]])
            return self._embed_packed(tokens, lengths)
        return self._embed_trie(degree, sets, changed)

    def _embed_packed(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        # Pack the token ids, then embed only the packed tokens.
        ids = pack_padded_sequence(tokens, lengths.cpu(), batch_first=True,
                                   enforce_sorted=False)
        packed = PackedSequence(self.embedding(ids.data), ids.batch_sizes,
                                ids.sorted_indices, ids.unsorted_indices)
        with _ieee_float32_rnn():
            _, (h_n, _) = self.lstm(packed)
        return torch.cat([h_n[0], h_n[1]], dim=-1)

    def _embed_trie(self, degree: DegreeSets, sets: Tensor,
                    changed: Optional[Tuple[Tensor, Tensor, Tensor]]
                    ) -> Tensor:
        if changed is not None:
            # The changed sets join the tries as new leaves U, U + 1, ...
            # (they share their prefixes, and suffixes, with the sets they
            # come from).
            base, rows, lengths = changed
            degree = degree._replace(
                forward_trie=extend_trie(
                    degree.forward_trie, degree.tokens[base],
                    degree.forward_trie.leaf[base], rows, lengths),
                backward_trie=extend_trie(
                    degree.backward_trie,
                    reverse_padded(degree.tokens[base], degree.lengths[base]),
                    degree.backward_trie.leaf[base],
                    reverse_padded(rows, lengths), lengths))
            sets = torch.cat([sets, degree.tokens.size(0) + torch.arange(
                base.numel(), device=base.device)])
        tries = (degree.forward_trie, degree.backward_trie)
        return torch.cat([
            TrieLSTM.apply(*self._direction_weights(suffix),
                           *_needed_nodes(trie, sets))
            for trie, suffix in zip(tries, ('', '_reverse'))
        ], dim=-1)

    def _direction_weights(self, suffix: str):
        # The input projection of every token (K + 1 rows) with both
        # biases, and the recurrent weight, of one LSTM direction.
        projection = (self.embedding.weight @ getattr(
            self.lstm, f'weight_ih_l0{suffix}').t() +
                      getattr(self.lstm, f'bias_ih_l0{suffix}') +
                      getattr(self.lstm, f'bias_hh_l0{suffix}'))
        return projection, getattr(self.lstm, f'weight_hh_l0{suffix}')

    def forward(self, edge_index: Any, edge_type: Optional[Tensor] = None,
                num_nodes: Optional[int] = None) -> Tensor:
        r"""Returns :math:`\rho` of shape :obj:`[N, K]` for every entity.

        Args:
            edge_index (torch.Tensor or graph): Edge indices of shape
                :obj:`[2, E]`, or a graph object (a :obj:`Data`,
                :obj:`HeteroData`, PyG KG dataset or
                :class:`~pyg_degreembed.TypedGraph`), read as by
                :meth:`pyg_degreembed.RuleReasoner.forward` (inverse edges
                are added to types below :math:`K / 2`).
            edge_type (torch.Tensor, optional): Edge types, shape :obj:`[E]`.
            num_nodes (int, optional): The number of entities :math:`N`.
        """
        if self.num_edge_types % 2:
            raise ValueError(f'{self} has an odd number of edge types; it '
                             f'reads graphs with inverse edges (K = 2R)')
        graph = resolve_graph(edge_index, edge_type, num_nodes,
                              num_relations=self.num_edge_types // 2,
                              device=self.embedding.weight.device,
                              owner=f'this {type(self).__name__}')
        return self.source_weights(graph).to_dense()

    def edge_weight(self, edge_index: Tensor, edge_type: Tensor,
                    num_nodes: Optional[int] = None, *,
                    graph: Any = None, scale: bool = False,
                    at: str = 'source') -> Tensor:
        r""":math:`\rho` as one weight per edge, for PyG's layers that take
        an :obj:`edge_weight` (:class:`~torch_geometric.nn.conv.GraphConv`,
        :class:`~torch_geometric.nn.conv.GCNConv`, ...,
        :class:`~pyg_degreembed.nn.WeightedRGCNConv` for relations): an edge
        :math:`i \xrightarrow{k} j` gets the weight its source gives its
        type (:obj:`at="source"`, as the rule reasoner's hops), or the
        weight its target gives the inverse type :math:`\bar{k} = (k + K/2)
        \bmod K`, the type of the edge :math:`j \xrightarrow{\bar{k}} i`
        (:obj:`at="target"`: the entity that aggregates the messages weighs
        them by its own degree-type set, an attention over its relations),

        .. math::
            w_{(i, k, j)} = s \cdot \rho_{i, k} \quad \textrm{or} \quad
            w_{(i, k, j)} = s \cdot \rho_{j, \bar{k}},

        with :math:`s = K` where :obj:`scale` (a uniform :math:`\rho` then
        gives every edge weight 1, as a layer without weights; raw
        :math:`\rho` is about :math:`1/K`, which self-loops of weight 1
        swamp) and :math:`s = 1` otherwise.  :math:`\rho` is computed on
        :obj:`graph` (by default the graph of these edges), as by
        :meth:`forward`, with inverse edges added to types below
        :math:`K / 2`.  Differentiable: the layer trains with the network
        that uses the weights.

        To weight a part of a graph (after
        :func:`~torch_geometric.utils.dropout_edge`, or the edges of
        :func:`~torch_geometric.utils.k_hop_subgraph` in the full graph's
        node ids) by the full graph's :math:`\rho`, pass the full graph as
        :obj:`graph`: its :math:`\rho` is computed once per graph object
        (cached), and each part only reads its edges' rows.  Without it,
        :math:`\rho` is that of the part's own edges (degree-type sets of
        the subgraph), computed anew for every new edge set.

        Args:
            edge_index (torch.Tensor): Edge indices of shape :obj:`[2, E]`
                (node ids of :obj:`graph` where it is given).
            edge_type (torch.Tensor): Edge types in :math:`[0, K)`, shape
                :obj:`[E]`.
            num_nodes (int, optional): The number of entities :math:`N`.
            graph (optional): The graph :math:`\rho` is computed on: a
                :obj:`(edge_index, edge_type)` pair or any graph
                :meth:`forward` takes. (default: :obj:`None`, these edges)
            scale (bool, optional): Multiply by :math:`K`.
                (default: :obj:`False`)
            at (str, optional): :obj:`"source"` or :obj:`"target"`: whose
                :math:`\rho` weighs the edge. (default: :obj:`"source"`)

        :rtype: :class:`torch.Tensor` of shape :obj:`[E]`
        """
        if at not in ('source', 'target'):
            raise ValueError(f"'at' must be 'source' or 'target', got {at!r}")
        if graph is None:
            rho = self(edge_index, edge_type, num_nodes)
        elif isinstance(graph, tuple):
            rho = self(*graph, num_nodes)
        else:
            rho = self(graph, num_nodes=num_nodes)
        edge_index = index_tensor(edge_index, 'edge_index').to(rho.device)
        edge_type = index_tensor(edge_type, 'edge_type').to(rho.device)
        if edge_index.numel() and (int(edge_index.max()) >= rho.size(0) or
                                   int(edge_index.min()) < 0):
            raise ValueError(f"'edge_index' holds node ids outside [0, "
                             f'{rho.size(0)}) of the graph rho is computed '
                             'on (a subgraph relabelled? pass its edges in '
                             "the full graph's ids)")
        K = self.num_edge_types
        weight = rho[edge_index[0], edge_type] if at == 'source' else \
            rho[edge_index[1], (edge_type + K // 2) % K]
        return weight * K if scale else weight

    def source_weights(self, graph: TypedGraph,
                       nodes: Optional[Tensor] = None,
                       left_out: Optional[Tuple[Tensor, ...]] = None
                       ) -> SourceWeights:
        r""":math:`\rho` as in :meth:`forward`, held once per degree-type
        set (:class:`~pyg_degreembed.data.typed_graph.SourceWeights`), so that
        nothing is computed or stored per entity: what a
        :class:`~pyg_degreembed.RuleReasoner` calls.

        Args:
            graph (TypedGraph): The observed graph (its degree-type sets are
                :obj:`graph.degree`).
            nodes (torch.Tensor, optional): If given, only the rows of these
                entities are computed and the other rows are zero (for when
                only they can be the source of an edge that is used).
                (default: :obj:`None`, all rows)
            left_out (Tuple[torch.Tensor, ...], optional): Edges that single
                queries do not see, :obj:`(src, edge_type, dst, query)` as
                in :meth:`TypedGraph.degree_without` (a training query's own
                edge and its inverse): the entities that lose an edge type
                by it read, in that query, the :math:`\rho` of their set
                without it, exactly as in the graph without those edges.
                (default: :obj:`None`)
        """
        degree = graph.degree
        if left_out is None:
            return self.weights_of_sets(degree, nodes)
        keys, base, rows, lengths = graph.degree_without(*left_out)
        if keys.numel() == 0:
            return self.weights_of_sets(degree, nodes)
        rho = self.weights_of_sets(degree, nodes, (base, rows, lengths))
        return rho._replace(override_key=keys,
                            override_row=rho.table.size(0) - keys.numel() +
                            torch.arange(keys.numel(), device=keys.device))

    def weights_of_sets(self, degree: DegreeSets,
                        nodes: Optional[Tensor] = None,
                        changed: Optional[Tuple[Tensor, Tensor, Tensor]] = None
                        ) -> SourceWeights:
        r""":meth:`source_weights` from given degree-type sets (and the
        rows of the sets :obj:`changed`, as in :meth:`embed_sets`, appended
        at the end of the table)."""
        U = degree.tokens.size(0)
        device = degree.tokens.device
        sets = torch.arange(U, device=device) if nodes is None else \
            torch.unique(degree.index[nodes])
        hidden = F.dropout(self._embed_bounded(degree, sets, changed),
                           self.dropout, self.training)
        rho = torch.softmax(self.lin(hidden), dim=-1)
        table, rest = rho[:sets.numel()], rho[sets.numel():]
        index = degree.index
        if nodes is not None:
            # Row of each set in `table`; sets not computed read a zero row.
            row = torch.full((U, ), sets.numel(), dtype=torch.long,
                             device=device)
            row[sets] = torch.arange(sets.numel(), device=device)
            table = torch.cat([table, table.new_zeros(1, table.size(1))])
            index = row[index]
        return SourceWeights(torch.cat([table, rest]), index)

    def _embed_bounded(self, degree: DegreeSets, sets: Tensor,
                       changed: Optional[Tuple[Tensor, Tensor, Tensor]]
                       ) -> Tensor:
        r""":meth:`embed_sets` in bounded memory: where :obj:`sets` lead to
        more than :data:`MAX_TRIE_NODES` trie nodes (about, counted as
        their share of both tries), in parts of about that many without
        gradients, and in training only a random sample of at most that
        many nodes (:func:`_sample_size`) with gradients, the others reading
        their last embedding
        (:attr:`history`, GNNAutoScale's historical embeddings): a step's
        memory and time are then independent of the number of sets."""
        tries = degree.forward_trie.token.numel() + \
            degree.backward_trie.token.numel()
        U, S = degree.tokens.size(0), sets.numel()
        parts = max(math.ceil(tries * S / max(U, 1) / MAX_TRIE_NODES), 1)
        if parts == 1:
            return self.embed_sets(degree, sets, changed)
        size = math.ceil(S / parts)
        if not torch.is_grad_enabled():
            return torch.cat([self.embed_sets(degree, part) for part in
                              sets.split(size)] +
                             ([self.embed_sets(degree, sets[:0], changed)]
                              if changed is not None else []))
        if not self.training:  # gradients asked for outside training
            return self.embed_sets(degree, sets, changed)
        size = _sample_size(degree, sets)
        last, table = self._history
        if last is None or last() is not degree.tokens or table is None:
            with torch.no_grad():
                table = self._embed_bounded(degree, torch.arange(
                    U, device=sets.device), None)
            self._history = (weakref.ref(degree.tokens), table)
        position = torch.randperm(S, device=sets.device)[:size]
        fresh = self.embed_sets(degree, sets[position], changed)
        table[sets[position]] = fresh[:size].detach()
        return torch.cat([table[sets].index_copy(0, position, fresh[:size]),
                          fresh[size:]])

    @property
    def history(self) -> Optional[Tensor]:
        r"""The last embedding :math:`\mathbf{H}` of every degree-type set
        of the graph trained on last, where its sets lead to more than
        :data:`MAX_TRIE_NODES` trie nodes: a training step then embeds a
        random sample of the sets it reads with gradients (about that many
        nodes) and writes them here, and the other sets read their row
        (GNNAutoScale's historical embeddings, Fey et al., 2021), so that a
        step's memory and time do not grow with the graph.  Computed for
        all sets (without gradients) at the first such step after
        :meth:`train` or :meth:`eval`; :obj:`None` before."""
        return self._history[1]

    def train(self, mode: bool = True) -> 'DegreeEmbedding':
        self._history = (None, None)
        return super().train(mode)

    def __getstate__(self):
        # The history is per graph and process: not pickled (deepcopy,
        # torch.save of the module).
        state = super().__getstate__()
        state['_history'] = (None, None)
        return state

    def config(self) -> dict:
        r"""The constructor arguments, to rebuild the layer (:obj:`dropout`
        only when set, so that checkpoints of layers without it read as
        before)."""
        config: Dict[str, Any] = dict(
            num_edge_types=self.num_edge_types,
            embedding_dim=self.embedding_dim,
            hidden_channels=self.hidden_channels)
        if self.dropout:
            config['dropout'] = self.dropout
        return config

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({self.num_edge_types}, '
                f'embedding_dim={self.embedding_dim}, '
                f'hidden_channels={self.hidden_channels}'
                f'{f", dropout={self.dropout}" if self.dropout else ""})')


@contextmanager
def _ieee_float32_rnn():
    r"""cuDNN's RNNs in IEEE float32 within the block: PyTorch lets them use
    TF32 by default, which moves the scores by ~1e-4 from the CPU's (the
    backward pass, run later, follows PyTorch's setting)."""
    cudnn = torch.backends.cudnn
    rnn = getattr(cudnn, 'rnn', None)
    owner, name, value = (rnn, 'fp32_precision', 'ieee') if hasattr(
        rnn, 'fp32_precision') else (cudnn, 'allow_tf32', False)
    before = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, before)


def _sample_size(degree: DegreeSets, sets: Tensor) -> int:
    r"""How many of :obj:`sets` a training step embeds with gradients:
    :data:`MAX_TRIE_NODES` over twice their mean length.  A random sample
    shares few prefixes, so each set may need as many nodes of each trie
    as it has tokens (sized as a share of the tries instead, a sample at
    10M triples leads to twice the nodes aimed at)."""
    mean_length = float(degree.lengths[sets].float().mean())
    return min(max(int(MAX_TRIE_NODES / (2 * max(mean_length, 1.))), 1),
               sets.numel())


def _needed_nodes(trie: PrefixTrie, sets: Tensor):
    r"""The trie nodes that lead to the sequences :obj:`sets`, in level
    order, as the arguments :obj:`token, parent, level_ptr, out_rows` of
    :class:`TrieLSTM`."""
    ptr = trie.level_ptr.tolist()
    needed = torch.zeros(trie.token.numel(), dtype=torch.bool,
                         device=sets.device)
    needed[trie.leaf[sets]] = True
    for level in range(len(ptr) - 2, 0, -1):  # mark the ancestors
        lo, hi = ptr[level], ptr[level + 1]
        needed[trie.parent[lo:hi][needed[lo:hi]]] = True
    # Trie nodes are stored in level order already.
    nodes = needed.nonzero().view(-1)
    row = torch.full_like(trie.token, -1)
    row[nodes] = torch.arange(nodes.numel(), device=nodes.device)
    level_ptr = torch.searchsorted(nodes, trie.level_ptr).tolist()
    parent = row[trie.parent[nodes].clamp(min=0)]
    return trie.token[nodes], parent, level_ptr, row[trie.leaf[sets]]
