import inspect
import weakref
from typing import Any, List, Optional, Tuple

import torch
from torch import Tensor
from torch.nn import LSTM, Embedding, Linear, Module, ModuleList
from torch.utils.checkpoint import checkpoint
from torch_geometric.nn.inits import reset
from torch_geometric.utils import cumsum

from pyg_degreembed.data.kg import (MAX_CHANNELS, MAX_RANK, check_at_most,
                                    check_positive_ints, check_rule_length,
                                    index_tensor, query_edges)
from pyg_degreembed.data.ragged import ragged_arange
from pyg_degreembed.data.resolve import resolve_graph
from pyg_degreembed.data.typed_graph import Signals, SourceWeights, TypedGraph
from pyg_degreembed.nn.degree_embedding import DegreeEmbedding


class RuleReasoner(Module):
    r"""The differentiable rule learner of DRUM (`"DRUM: End-To-End
    Differentiable Rule Mining On Knowledge Graphs"
    <https://arxiv.org/abs/1911.00055>`_), on which Neural LP and DegreEmbed
    build.

    A query :math:`(h, q, ?)` is answered by :math:`L` steps of soft rule
    application from the one-hot vector :math:`\mathbf{x}_0 =
    \mathbf{v}_h`, independently for each of :math:`T` ranks:

    .. math::
        \mathbf{x}^{(j)}_l = \mathrm{norm}\Big( \sum_{k=1}^{K}
        a^{(j)}_{l,k} \, \mathbf{x}^{(j)\top}_{l-1} \mathbf{B}_k +
        a^{(j)}_{l,0} \, \mathbf{x}^{(j)}_{l-1} \Big), \qquad
        \mathrm{score}(\cdot \mid h, q) = \sum_{j=1}^{T} \mathbf{x}^{(j)}_L,

    with :math:`\mathrm{norm}(\mathbf{x}) = \mathbf{x} /
    \max(\sum_i x_i, \epsilon)`, :math:`K = 2R` edge types (relations and
    their inverses) and the identity as operator :math:`0`.  The attention
    :math:`\mathbf{a}^{(j)}_l = \mathrm{softmax}(\mathbf{W} [\mathbf{h}_l \|
    \mathbf{h}'_l] + \mathbf{b})` comes from the :math:`j`-th bidirectional
    LSTM run over the query embedding repeated :math:`L` times.

    The operators are :math:`\mathbf{B}_k[e, j] = \mathbf{M}_k[e, j] \,
    \rho_{e,k}`, with :math:`\mathbf{M}_k` the adjacency matrix of edge type
    :math:`k` (counting duplicate edges) and :math:`\rho` the per-source
    weights of the :obj:`edge_weight` module:

    * :obj:`edge_weight=None` (:math:`\rho = 1`): DRUM; with :obj:`rank=1`
      the rank-one form of Neural LP;
    * :obj:`edge_weight=DegreeEmbedding(2 * R)`: DegreEmbed
      (:class:`DegreEmbedReasoner` builds exactly this); call
      :obj:`requires_grad_(False)` on the layer to keep it frozen;
    * any module with a method :obj:`source_weights(graph, nodes=None)` that
      returns :math:`\rho` for a :class:`~pyg_degreembed.TypedGraph` of
      :math:`N` entities, as a tensor of shape :obj:`[N, K]` or as
      :class:`~pyg_degreembed.SourceWeights` (rows of entities outside
      :obj:`nodes` are never read), e.g. weights from pre-trained entity
      embeddings.  If that method also takes :obj:`left_out` (as the
      degree embedding's does), it receives the edges each training query
      leaves out, so that weights computed from the edges leave them out
      too.

    Args:
        num_relations (int): The number :math:`R` of KG relations.
        num_steps (int, optional): The maximum rule length :math:`L`.
            (default: :obj:`2`)
        rank (int, optional): The rank :math:`T`. (default: :obj:`3`)
        embedding_dim (int, optional): Size of the query embeddings.
            (default: :obj:`128`)
        hidden_channels (int, optional): Hidden size of each LSTM direction.
            (default: :obj:`128`)
        eps (float, optional): The :math:`\epsilon` of the normalisation.
            (default: :obj:`1e-20`)
        recompute (bool, optional): Memory-lean training: keep only the
            input of every hop (and of :math:`\rho`) for the backward pass
            and recompute the rest there
            (:func:`torch.utils.checkpoint.checkpoint`), trading time for
            memory. (default: :obj:`False`)
        edge_weight (torch.nn.Module, optional): The module giving
            :math:`\rho`, see above; it keeps the parameters it comes with
            (:meth:`reset_parameters` resets it too). (default: :obj:`None`)

    Shapes:
        - **input:** the graph (:obj:`edge_index` :math:`(2, E)` and
          :obj:`edge_type` :math:`(E)`, or a graph object, see
          :meth:`forward`), head entities :math:`(B)`, query relations
          :math:`(B)` in :math:`[0, 2R)`
        - **output:** scores :math:`(B, N)`
    """
    num_relations: int
    num_edge_types: int
    num_steps: int
    rank: int
    embedding_dim: int
    hidden_channels: int
    eps: float
    recompute: bool
    edge_weight: Optional[Module]

    def __init__(self, num_relations: int, *, num_steps: int = 2,
                 rank: int = 3,
                 embedding_dim: int = 128, hidden_channels: int = 128,
                 eps: float = 1e-20, recompute: bool = False,
                 edge_weight: Optional[Module] = None):
        super().__init__()
        check_positive_ints(num_relations=num_relations)
        check_rule_length(num_steps)
        check_at_most(MAX_RANK, 'one LSTM each', rank=rank)
        check_at_most(MAX_CHANNELS, '', embedding_dim=embedding_dim,
                      hidden_channels=hidden_channels)
        if edge_weight is not None and not callable(
                getattr(edge_weight, 'source_weights', None)):
            raise TypeError(f"'edge_weight' must be a module with a method "
                            f"source_weights(graph, nodes), got "
                            f"{type(edge_weight).__name__}")
        self.num_relations = num_relations
        self.num_edge_types = 2 * num_relations
        self.num_steps = num_steps
        self.rank = rank
        self.embedding_dim = embedding_dim
        self.hidden_channels = hidden_channels
        self.eps = eps
        self.recompute = recompute

        self.query_embedding = Embedding(self.num_edge_types, embedding_dim)
        self.controllers = ModuleList([
            LSTM(embedding_dim, hidden_channels, batch_first=True,
                 bidirectional=True) for _ in range(rank)
        ])
        # Operators 0..K-1 are the edge types, operator K the identity.
        self.attention = Linear(2 * hidden_channels, self.num_edge_types + 1)
        self._reset_controllers()
        # A given edge weight keeps its (pre-trained or frozen) parameters.
        self.edge_weight = edge_weight
        # rho of the last graph in inference (see source_weights).
        self._inference_rho: Tuple[Any, Any, Any] = (None, None, None)

    def __getstate__(self):
        # The inference cache holds a weak reference (not picklable).
        state = super().__getstate__()
        state['_inference_rho'] = (None, None, None)
        return state

    def _reset_controllers(self):
        self.query_embedding.reset_parameters()
        for lstm in self.controllers:
            lstm.reset_parameters()
        self.attention.reset_parameters()

    def reset_parameters(self):
        r"""Resets all learnable parameters, the edge weight's included."""
        self._reset_controllers()
        if self.edge_weight is not None:
            reset(self.edge_weight)

    def operator_attention(self, relation: Optional[Tensor] = None) -> Tensor:
        r"""The attention over the :math:`K + 1` operators (edge types, then
        the identity) for every query relation, rank and step.

        Args:
            relation (torch.Tensor, optional): Query relations in
                :math:`[0, 2R)`, shape :obj:`[B]`. (default: all :math:`2R`)

        :rtype: :class:`torch.Tensor` of shape :obj:`[B, T, L, K + 1]`
        """
        device = self.query_embedding.weight.device
        if relation is None:
            relation = torch.arange(self.num_edge_types, device=device)
        # Run the controllers once per distinct relation of the batch.
        unique, index = torch.unique(relation, return_inverse=True)
        x = self.query_embedding(unique).unsqueeze(1)
        x = x.expand(-1, self.num_steps, -1)
        out = torch.stack([lstm(x)[0] for lstm in self.controllers], dim=1)
        return torch.softmax(self.attention(out), dim=-1)[index]

    def source_weights(self, graph: TypedGraph,
                       nodes: Optional[Tensor] = None,
                       left_out: Optional[Tuple[Tensor, ...]] = None
                       ) -> Optional[SourceWeights]:
        r"""The per-source weights :math:`\rho` of the edge types on
        :obj:`graph` (:obj:`None` without an edge weight, i.e.
        :math:`\rho = 1`).

        Args:
            graph (TypedGraph): The observed graph.
            nodes (torch.Tensor, optional): If given, only the rows of these
                entities are needed. (default: :obj:`None`)
            left_out (Tuple[torch.Tensor, ...], optional): Edges single
                queries do not see, :obj:`(src, edge_type, dst, query)`,
                passed on to an edge weight whose :obj:`source_weights`
                takes :obj:`left_out` (as
                :class:`~pyg_degreembed.DegreeEmbedding` does: its
                features depend on the edges). (default: :obj:`None`)

        In inference (evaluation mode, no gradients, no left-out edges)
        :math:`\rho` is computed for every entity once and reused while the
        graph and the edge weight's parameters stay the same.
        """
        if self.edge_weight is None:
            return None
        # The edge weight's (duck-typed, checked in __init__).
        function = getattr(self.edge_weight, 'source_weights')
        if left_out is None and not self.training and \
                not torch.is_grad_enabled():
            # In inference rho does not depend on the queries: computed once
            # for all entities and kept while the graph and the edge
            # weight's parameters stay the same (every batch of an
            # evaluation reads the same).
            state = tuple((id(p), p.data_ptr(), p._version)
                          for p in self.edge_weight.parameters())
            last, last_state, rho = self._inference_rho
            if last is None or last() is not graph or last_state != state:
                rho = SourceWeights.wrap(function(graph, None))
                self._inference_rho = (weakref.ref(graph), state, rho)
            return rho
        if left_out is not None and 'left_out' in inspect.signature(
                function).parameters:
            return SourceWeights.wrap(function(graph, nodes,
                                               left_out=left_out))
        return SourceWeights.wrap(function(graph, nodes))

    def graph(self, edge_index: Any, edge_type: Optional[Tensor] = None,
              num_nodes: Optional[int] = None) -> TypedGraph:
        r"""The prepared graph this model reasons on, from any graph input
        of :meth:`forward` (see :func:`~pyg_degreembed.resolve_graph`; the
        result is cached, so calling this is cheap)."""
        return resolve_graph(edge_index, edge_type, num_nodes,
                             num_relations=self.num_relations,
                             device=self.query_embedding.weight.device)

    def forward(self, edge_index: Any, edge_type: Optional[Tensor] = None,
                head: Optional[Tensor] = None,
                relation: Optional[Tensor] = None, *,
                num_nodes: Optional[int] = None,
                remove_tail: Optional[Tensor] = None,
                mode: str = 'auto') -> Tensor:
        r"""Scores every entity as the answer of the queries
        :obj:`(head, relation, ?)`.

        The graph comes first, in one of two forms (as in
        :class:`~torch_geometric.nn.conv.RGCNConv`):

        * :obj:`model(edge_index, edge_type, head, relation)` (and
          :obj:`num_nodes=` if some entities have no edges): typed edges.
          Types in :math:`[0, R)` are the KG's relations and the inverse
          edges (type :obj:`r + R`) are added; a graph that holds types in
          :math:`[R, 2R)` must hold every inverse edge already (as
          :class:`~torch_geometric.datasets.RelLinkPredDataset` does);
        * :obj:`model(data, head, relation)` with :obj:`data` a :obj:`Data`,
          a :obj:`HeteroData`, a PyG KG dataset (whatever
          :func:`~pyg_degreembed.as_kg` reads; valid and test triples are
          never edges) or a :class:`~pyg_degreembed.TypedGraph`.

        The graph is prepared once and cached (keyed on its tensors).

        Args:
            edge_index (torch.Tensor or graph): Edge indices of shape
                :obj:`[2, E]`, or a graph object.
            edge_type (torch.Tensor, optional): Edge types, shape
                :obj:`[E]` (only with an :obj:`edge_index` tensor).
            head (torch.Tensor): Head entities, shape :obj:`[B]`.
            relation (torch.Tensor): Query relations in :math:`[0, 2R)`
                (:obj:`r + R` asks for the head of :obj:`r`), shape
                :obj:`[B]`.
            num_nodes (int, optional): The number of entities :math:`N`
                (with tensors; default: one more than the largest id).
            remove_tail (torch.Tensor, optional): If given (during training),
                query :obj:`b` does not see the edge :obj:`(head[b],
                relation[b], remove_tail[b])` nor its inverse, for that query
                only. (default: :obj:`None`)
            mode (str, optional): Propagation mode, see
                :meth:`TypedGraph.propagate`.  In inference (evaluation
                mode, no gradients, no :obj:`remove_tail`), :obj:`"auto"`
                takes each hop either sparse or, once cheaper, grouped:
                the queries of one relation at one rank as one sparse
                matrix product (:meth:`TypedGraph.propagate_groups`);
                :obj:`"grouped"` takes every hop so. (default:
                :obj:`"auto"`)

        :rtype: :class:`torch.Tensor` of shape :obj:`[B, N]`
        """
        graph, (head, relation) = self._parse(
            edge_index, edge_type, [head, relation], num_nodes,
            ('head', 'relation'))
        inference = remove_tail is None and not self.training and \
            not torch.is_grad_enabled()
        if mode == 'grouped' and not inference:
            raise ValueError("mode='grouped' is for inference: in evaluation "
                             "mode, without gradients and 'remove_tail'")
        if inference and mode in ('auto', 'grouped'):
            return self._infer(graph, head, relation, mode)
        N, B, T = graph.num_nodes, head.numel(), self.rank
        x, a, rho, removed = self._walk(graph, head, relation, remove_tail,
                                        mode)
        K = self.num_edge_types
        if not graph.hop_is_sparse(x, mode):
            # Every entry is read: the dense hop's matrix, normalised and
            # summed over the ranks as it is (no non-zero entries to find).
            x = self._run(graph.propagate_dense, x, a[:K], rho, a[K],
                          removed)
            x = x / x.sum(dim=0).clamp(min=self.eps)
            return x.view(N, B, T).sum(dim=-1).t().contiguous()
        x = self._run(graph.propagate, x, a[:K], rho, a[K], removed,
                      'sparse')  # as decided above
        x = x.normalize(self.eps)
        # Sum over ranks: column c adds to query c // T.
        scores = x.value.new_zeros(B * N).index_add(
            0, torch.div(x.column, T, rounding_mode='floor') * N + x.node,
            x.value)
        return scores.view(B, N)

    def _infer(self, graph: TypedGraph, head: Tensor, relation: Tensor,
               mode: str) -> Tensor:
        # forward() in inference: the queries of one relation at one rank
        # share their attention, so once the signals have spread, each
        # such group takes its hops as one sparse matrix product
        # (TypedGraph.propagate_groups); hops before that are sparse.
        self._check_input(graph, head, relation)
        N, B, T, K = graph.num_nodes, head.numel(), self.rank, \
            self.num_edge_types
        if B == 0:
            return self.query_embedding.weight.new_zeros(0, N)
        order = torch.argsort(relation, stable=True)
        unique, counts = torch.unique_consecutive(relation[order],
                                                  return_counts=True)
        # Group g = u * T + j holds the queries of relation unique[u] at
        # rank j; column c of the signals belongs to group[c] and query
        # query[c].
        sizes = counts.repeat_interleave(T)
        ptr = cumsum(counts)  # the queries of relation unique[u]
        group, position = ragged_arange(ptr[:-1].repeat_interleave(T),
                                        sizes, B * T)
        query = order[position]
        attention = self.operator_attention(unique).flatten(0, 1)
        rho = self.source_weights(graph)
        x = Signals.one_hot(head[query], attention.new_ones(B * T))
        blocks = None
        for step in range(self.num_steps):
            a = attention[:, step]  # [G, K + 1]
            if blocks is None and mode == 'auto' and \
                    not graph.groups_are_cheaper(x, a.size(0)):
                a = a.index_select(0, group).t()
                x = graph.propagate(x, a[:K], rho, a[K], None, 'sparse')
                x = x.normalize(self.eps)
                continue
            if blocks is None:
                # Blocks of at most GROUP_COLUMNS columns of one group.
                width, block_group = [], []
                for g, n in enumerate(sizes.tolist()):
                    for lo in range(0, n, graph.GROUP_COLUMNS):
                        width.append(min(graph.GROUP_COLUMNS, n - lo))
                        block_group.append(g)
                blocks = [b.contiguous() for b in
                          x.to_dense(N).split(width, dim=1)]
            blocks = graph.propagate_groups(blocks, block_group,
                                            a[:, :K].t(), rho, a[:, K])
            for block in blocks:
                block.div_(block.sum(dim=0).clamp(min=self.eps))
        if blocks is None:  # every hop sparse: sum the entries over ranks
            return x.value.new_zeros(B * N).index_add(
                0, query.index_select(0, x.column) * N + x.node,
                x.value).view(B, N)
        # Sum over the ranks (the T groups of each relation), then back in
        # the order of the queries.
        dense = torch.cat(blocks, dim=1)
        ptr = ptr.tolist()
        summed = torch.cat([
            dense[:, T * lo:T * hi].reshape(N, T, hi - lo).sum(dim=1)
            for lo, hi in zip(ptr[:-1], ptr[1:])], dim=1)
        out = summed.new_empty(B, N)
        out[order] = summed.t()
        return out

    def score(self, edge_index: Any, edge_type: Optional[Tensor] = None,
              head: Optional[Tensor] = None,
              relation: Optional[Tensor] = None,
              tail: Optional[Tensor] = None, *,
              num_nodes: Optional[int] = None, remove_edge: bool = True,
              mode: str = 'auto') -> Tensor:
        r"""The scores of the given answers only, :obj:`forward(...,
        remove_tail=tail if remove_edge else None)[b, tail[b]]`, computed
        without scoring every entity in the last step (see
        :meth:`TypedGraph.propagate_at`): the fast path of training with the
        :obj:`"nll"` loss.  The graph is given as in :meth:`forward`:
        :obj:`score(edge_index, edge_type, head, relation, tail)` or
        :obj:`score(data, head, relation, tail)`.

        :rtype: :class:`torch.Tensor` of shape :obj:`[B]`
        """
        graph, (head, relation, tail) = self._parse(
            edge_index, edge_type, [head, relation, tail], num_nodes,
            ('head', 'relation', 'tail'))
        K, T = self.num_edge_types, self.rank
        self._check_entities(graph, tail, 'tail')
        x, a, rho, removed = self._walk(graph, head, relation,
                                        tail if remove_edge else None, mode)
        value, total = self._run(graph.propagate_at, x,
                                 tail.repeat_interleave(T), a[:K], rho, a[K],
                                 removed, mode)
        # A target that no path reaches has no gradient, as in forward().
        value = torch.where(value != 0, value / total.clamp(min=self.eps),
                            0.)
        return value.view(-1, T).sum(dim=-1)

    def path_factors(self, edge_index: Any, edge_type: Optional[Tensor] = None,
                     head: Optional[Tensor] = None,
                     relation: Optional[Tensor] = None, *,
                     num_nodes: Optional[int] = None,
                     remove_tail: Optional[Tensor] = None
                     ) -> Tuple[Tensor, Optional[SourceWeights]]:
        r"""The factors of a grounded path in :meth:`forward` (same
        arguments): :math:`a^{(j)}_{l,o} / Z^{(j)}_l` for every query, rank
        :math:`j`, step :math:`l` and operator :math:`o` (the identity
        last), with the normalisers :math:`Z^{(j)}_l = \max(\sum_i
        (\ldots)_i, \epsilon)` of :meth:`forward`, and :math:`\rho` as
        the queries see it (:obj:`None` without an edge weight; one column
        per query).  For one query the normalisers are constants, so the
        score of :math:`t` is the sum over the paths :math:`h \to t` of
        :math:`\sum_j \prod_l` (factor of the step's operator
        :math:`\times` :math:`\rho` of the step's source and edge type),
        an edge counted once per copy (see
        :mod:`pyg_degreembed.interpret.explain`).

        :rtype: (:class:`torch.Tensor` of shape :obj:`[B, T, L, K + 1]`,
            float64; :class:`~pyg_degreembed.SourceWeights` or :obj:`None`)
        """
        graph, (head, relation) = self._parse(
            edge_index, edge_type, [head, relation], num_nodes,
            ('head', 'relation'))
        totals: List[Tensor] = []
        x, a, rho, removed = self._walk(graph, head, relation, remove_tail,
                                        'auto', totals)
        K = self.num_edge_types
        x = graph.propagate(x, a[:K], rho, a[K], removed)
        totals.append(self._total(x))
        total = torch.stack(totals, dim=-1).view(head.numel(), self.rank,
                                                 self.num_steps)
        factors = self.operator_attention(relation).double() / \
            total.double().unsqueeze(-1)
        if rho is not None:
            rho = rho._replace(columns_per_query=1)
        return factors, rho

    def _total(self, x: Signals) -> Tensor:
        return x.value.new_zeros(x.num_columns).index_add(
            0, x.column, x.value).clamp(min=self.eps)

    def _parse(self, edge_index, edge_type, query: List, num_nodes,
               names: Tuple[str, ...]):
        # The two call forms: (edge_index, edge_type, *query) and
        # (graph, *query), where the query tensors arrive one slot early.
        if not isinstance(edge_index, Tensor) and edge_type is not None:
            if query[-1] is not None:
                raise TypeError(f'Too many arguments: a graph object takes '
                                f'the place of edge_index and edge_type, '
                                f'then {", ".join(names)}')
            query = [edge_type] + query[:-1]
            edge_type = None
        for value, name in zip(query, names):
            if value is None:
                raise TypeError(f"Missing '{name}'")
        query = [index_tensor(value, name) for value, name in
                 zip(query, names)]
        graph = self.graph(edge_index, edge_type, num_nodes)
        return graph, [q.to(graph.device) for q in query]

    def _walk(self, graph, head, relation, remove_tail, mode, totals=None):
        # The first L - 1 steps; returns the signals, the attention of the
        # last step [K + 1, C], rho and the left-out edges (and appends each
        # step's normalisers to `totals` if given).
        self._check_input(graph, head, relation)
        K, T = self.num_edge_types, self.rank
        C = head.numel() * T
        attention = self.operator_attention(relation)  # [B, T, L, K + 1]
        left_out = removed = None
        if remove_tail is not None:
            remove_tail = index_tensor(remove_tail,
                                       'remove_tail').to(graph.device)
            if remove_tail.shape != head.shape:
                raise ValueError(f"'remove_tail' must have the shape of "
                                 f"'head' {list(head.shape)}, got "
                                 f"{list(remove_tail.shape)}")
            self._check_entities(graph, remove_tail, 'remove_tail')
            left_out = query_edges(head, relation, remove_tail,
                                   self.num_relations)
            lo, hi = graph.edge_range(*left_out[:3])
            removed = (lo.repeat_interleave(T, 0),
                       hi.repeat_interleave(T, 0))
        # Only entities within L - 1 hops of a head can send a signal.
        rho = None
        if self.edge_weight is not None:
            sources = graph.neighborhood(head, self.num_steps - 1)
            rho = self._run(
                self.source_weights, graph,
                sources if sources.numel() < graph.num_nodes else None,
                left_out)
            if rho is not None:
                rho = rho._replace(columns_per_query=T)

        # Column c = b * T + j holds query b at rank j.
        x = Signals.one_hot(head.repeat_interleave(T),
                            attention.new_ones(C))

        def step_attention(step):
            return attention[:, :, step].reshape(C, K + 1).t()

        for step in range(self.num_steps - 1):
            a = step_attention(step)
            x = self._run(graph.propagate, x, a[:K], rho, a[K], removed,
                          mode)
            if totals is not None:
                totals.append(self._total(x))
            x = x.normalize(self.eps)
        return x, step_attention(self.num_steps - 1), rho, removed

    def _run(self, function, *args):
        # A hop or rho, recomputed in the backward pass if memory-lean.
        if self.recompute and torch.is_grad_enabled():
            return checkpoint(function, *args, use_reentrant=False)
        return function(*args)

    def rules(self, relation: Optional[int] = None, k: int = 10,
              inverse: bool = True, data: Any = None,
              confidence: str = 'grounded',
              triples: Optional[Tensor] = None) -> list:
        r"""The top-:obj:`k` learned rules of query relation
        :obj:`relation`, or of every query relation (:math:`2R` of them, or
        only the :math:`R` forward ones with :obj:`inverse=False`) when it
        is :obj:`None`.  :obj:`confidence="grounded"` (the default) gives
        each rule's share of the model's score mass on the training queries
        of :obj:`data` (or on :obj:`triples`), :obj:`"attention"` the
        attention-only confidence; see
        :func:`~pyg_degreembed.extract_rules`."""
        from pyg_degreembed.interpret.rules import extract_rules
        relations = [relation] if relation is not None else range(
            self.num_edge_types if inverse else self.num_relations)
        return [rule for q in relations for rule in extract_rules(
            self, q, k, confidence, data, triples)]

    def config(self) -> dict:
        r"""The constructor arguments, to rebuild the model (the edge weight
        is described by
        :func:`~pyg_degreembed.training.checkpoint.model_spec`)."""
        return dict(num_relations=self.num_relations,
                    num_steps=self.num_steps, rank=self.rank,
                    embedding_dim=self.embedding_dim,
                    hidden_channels=self.hidden_channels, eps=self.eps,
                    recompute=self.recompute)

    def _check_input(self, graph: TypedGraph, head: Tensor, relation: Tensor):
        if head.shape != relation.shape or head.dim() != 1:
            raise ValueError(f"'head' and 'relation' must be vectors of one "
                             f"length, got shapes {list(head.shape)} and "
                             f"{list(relation.shape)}")
        self._check_entities(graph, head, 'head')
        if relation.numel() and (int(relation.min()) < 0 or
                                 int(relation.max()) >= self.num_edge_types):
            raise ValueError(f"'relation' holds ids outside "
                             f"[0, {self.num_edge_types})")

    @staticmethod
    def _check_entities(graph: TypedGraph, ids: Tensor, name: str):
        if ids.dim() != 1:
            raise ValueError(f"'{name}' must be a vector")
        if ids.numel() and (int(ids.min()) < 0
                            or int(ids.max()) >= graph.num_nodes):
            raise ValueError(f"'{name}' holds entity ids outside "
                             f"[0, {graph.num_nodes})")

    def __repr__(self) -> str:
        weight = '' if self.edge_weight is None else \
            f', edge_weight={self.edge_weight}'
        return (f'{self.__class__.__name__}({self.num_relations}, '
                f'num_steps={self.num_steps}, rank={self.rank}{weight})')


class DegreEmbedReasoner(RuleReasoner):
    r"""The DegreEmbed model from the "DegreEmbed: incorporating entity
    embedding into logic rule learning for knowledge graph reasoning" paper
    (Li et al.): :obj:`RuleReasoner(num_relations, ...,
    edge_weight=DegreeEmbedding(2 * num_relations, embedding_dim,
    hidden_channels, degree_dropout))`, trained end to end.  Takes the
    arguments of :class:`RuleReasoner` except :obj:`edge_weight`; the degree
    embedding uses the model's :obj:`embedding_dim` and
    :obj:`hidden_channels`.

    Args:
        degree_dropout (float, optional): The degree embedding's
            :obj:`dropout`. (default: :obj:`0.0`)
    """
    def __init__(self, num_relations: int, *, degree_dropout: float = 0.0,
                 **kwargs):
        if 'edge_weight' in kwargs:
            raise TypeError("DegreEmbedReasoner builds its own edge weight; "
                            "use RuleReasoner(..., edge_weight=...) for "
                            "another")
        super().__init__(num_relations, **kwargs)
        # Built after the controllers, as before (same initialisation for
        # the same seed).
        self.edge_weight = DegreeEmbedding(2 * num_relations,
                                           self.embedding_dim,
                                           self.hidden_channels,
                                           degree_dropout)

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({self.num_relations}, '
                f'num_steps={self.num_steps}, rank={self.rank})')
