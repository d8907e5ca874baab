from typing import Optional

import torch
from torch import Tensor
from torch.nn import LSTM, Embedding, Linear, Module, ModuleList
from torch.utils.checkpoint import checkpoint

from ..kg import inverse_relation
from ..typed_graph import Signals, SourceWeights, TypedGraph
from .degree_embedding import DegreeEmbedding


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

    Here :math:`\mathbf{B}_k = \mathbf{M}_k` (the adjacency matrix of edge
    type :math:`k`, counting duplicate edges), which is DRUM; with
    :obj:`rank=1` it is the rank-one form of Neural LP.
    :class:`DegreEmbedReasoner` scales the rows of :math:`\mathbf{M}_k`
    by a learned degree embedding.

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

    Shapes:
        - **input:** :class:`~pyg_degreembed.TypedGraph` of :math:`N`
          entities, head entities :math:`(B)`, query relations :math:`(B)`
          in :math:`[0, 2R)`
        - **output:** scores :math:`(B, N)`
    """
    def __init__(self, num_relations: int, num_steps: int = 2, rank: int = 3,
                 embedding_dim: int = 128, hidden_channels: int = 128,
                 eps: float = 1e-20, recompute: bool = False):
        super().__init__()
        if num_relations < 1 or num_steps < 1 or rank < 1:
            raise ValueError("'num_relations', 'num_steps' and 'rank' must "
                             "be positive")
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
        self.reset_parameters()

    def reset_parameters(self):
        self.query_embedding.reset_parameters()
        for lstm in self.controllers:
            lstm.reset_parameters()
        self.attention.reset_parameters()

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

    #: Whether :meth:`edge_weight` returns weights (else all edges weigh 1).
    has_edge_weight = False

    def edge_weight(self, graph: TypedGraph,
                    nodes: Optional[Tensor] = None) -> Optional[Tensor]:
        r"""The per-source weight :math:`\rho` of every edge type, shape
        :obj:`[N, K]` (a tensor or
        :class:`~pyg_degreembed.typed_graph.SourceWeights`), or :obj:`None`
        for plain adjacency matrices.

        Args:
            graph (TypedGraph): The observed graph.
            nodes (torch.Tensor, optional): If given, only the rows of these
                entities are needed. (default: :obj:`None`)
        """
        return None

    def forward(self, graph: TypedGraph, head: Tensor, relation: Tensor,
                remove_tail: Optional[Tensor] = None,
                mode: str = 'auto') -> Tensor:
        r"""Scores every entity as the answer of the queries
        :obj:`(head, relation, ?)`.

        Args:
            graph (TypedGraph): The observed graph, with :math:`2R` edge
                types (inverse edges included).
            head (torch.Tensor): Head entities, shape :obj:`[B]`.
            relation (torch.Tensor): Query relations in :math:`[0, 2R)`
                (:obj:`r + R` asks for the head of :obj:`r`), shape
                :obj:`[B]`.
            remove_tail (torch.Tensor, optional): If given (during training),
                query :obj:`b` does not see the edge :obj:`(head[b],
                relation[b], remove_tail[b])` nor its inverse, for that query
                only. (default: :obj:`None`)
            mode (str, optional): Propagation mode, see
                :meth:`TypedGraph.propagate`. (default: :obj:`"auto"`)

        :rtype: :class:`torch.Tensor` of shape :obj:`[B, N]`
        """
        N, B, T = graph.num_nodes, head.numel(), self.rank
        x, a, rho, removed = self._walk(graph, head, relation, remove_tail,
                                        mode)
        K = self.num_edge_types
        x = self._run(graph.propagate, x, a[:K], rho, a[K], removed, mode)
        x = x.normalize(self.eps)
        # Sum over ranks: column c adds to query c // T.
        scores = x.value.new_zeros(B * N).index_add(
            0, torch.div(x.column, T, rounding_mode='floor') * N + x.node,
            x.value)
        return scores.view(B, N)

    def score(self, graph: TypedGraph, head: Tensor, relation: Tensor,
              tail: Tensor, remove_edge: bool = True,
              mode: str = 'auto') -> Tensor:
        r"""The scores of the given answers only, :obj:`forward(graph, head,
        relation, remove_tail=tail if remove_edge else None)[b, tail[b]]`,
        computed without scoring every entity in the last step (see
        :meth:`TypedGraph.propagate_at`): the fast path of training with the
        :obj:`"nll"` loss.

        :rtype: :class:`torch.Tensor` of shape :obj:`[B]`
        """
        K, T = self.num_edge_types, self.rank
        self._check_entities(graph, tail, 'tail')
        x, a, rho, removed = self._walk(graph, head, relation,
                                        tail if remove_edge else None, mode)
        value, total = self._run(graph.propagate_at, x,
                                 tail.repeat_interleave(T), a[:K], rho, a[K],
                                 removed)
        # A target that no path reaches has no gradient, as in forward().
        value = torch.where(value != 0, value / total.clamp(min=self.eps),
                            0.)
        return value.view(-1, T).sum(dim=-1)

    def _walk(self, graph, head, relation, remove_tail, mode):
        # The first L - 1 steps; returns the signals, the attention of the
        # last step [K + 1, C], rho and the left-out edges.
        self._check_input(graph, head, relation)
        K, T = self.num_edge_types, self.rank
        C = head.numel() * T
        attention = self.operator_attention(relation)  # [B, T, L, K + 1]
        # Only entities within L - 1 hops of a head can send a signal.
        rho = None
        if self.has_edge_weight:
            sources = graph.neighborhood(head, self.num_steps - 1)
            rho = self._run(
                self.edge_weight, graph,
                sources if sources.numel() < graph.num_nodes else None)

        # Column c = b * T + j holds query b at rank j.
        x = Signals.one_hot(head.repeat_interleave(T),
                            attention.new_ones(C))
        removed = None
        if remove_tail is not None:
            self._check_entities(graph, remove_tail, 'remove_tail')
            inverse = inverse_relation(relation, self.num_relations)
            lo1, hi1 = graph.edge_range(head, relation, remove_tail)
            lo2, hi2 = graph.edge_range(remove_tail, inverse, head)
            removed = (torch.stack([lo1, lo2], -1).repeat_interleave(T, 0),
                       torch.stack([hi1, hi2], -1).repeat_interleave(T, 0))

        def step_attention(step):
            return attention[:, :, step].reshape(C, K + 1).t()

        for step in range(self.num_steps - 1):
            a = step_attention(step)
            x = self._run(graph.propagate, x, a[:K], rho, a[K], removed,
                          mode)
            x = x.normalize(self.eps)
        return x, step_attention(self.num_steps - 1), rho, removed

    def _run(self, function, *args):
        # A hop or rho, recomputed in the backward pass if memory-lean.
        if self.recompute and torch.is_grad_enabled():
            return checkpoint(function, *args, use_reentrant=False)
        return function(*args)

    def rules(self, relation: Optional[int] = None, k: int = 10,
              inverse: bool = True) -> list:
        r"""The top-:obj:`k` learned rules of query relation
        :obj:`relation` (see :func:`~pyg_degreembed.extract_rules`), or of
        every query relation (:math:`2R` of them, or only the :math:`R`
        forward ones with :obj:`inverse=False`) when it is :obj:`None`."""
        from ..rules import extract_rules
        if relation is not None:
            return extract_rules(self, relation, k)
        count = self.num_edge_types if inverse else self.num_relations
        return [rule for q in range(count)
                for rule in extract_rules(self, q, k)]

    def config(self) -> dict:
        r"""The constructor arguments, to rebuild the model."""
        return dict(num_relations=self.num_relations,
                    num_steps=self.num_steps, rank=self.rank,
                    embedding_dim=self.embedding_dim,
                    hidden_channels=self.hidden_channels, eps=self.eps,
                    recompute=self.recompute)

    def _check_input(self, graph: TypedGraph, head: Tensor, relation: Tensor):
        if graph.num_edge_types != self.num_edge_types:
            raise ValueError(
                f'The graph has {graph.num_edge_types} edge types, but this '
                f'model was built for {self.num_relations} relations '
                f'({self.num_edge_types} edge types with inverses)')
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
        return (f'{self.__class__.__name__}({self.num_relations}, '
                f'num_steps={self.num_steps}, rank={self.rank})')


class DegreEmbedReasoner(RuleReasoner):
    r"""The DegreEmbed model from the "DegreEmbed: incorporating entity
    embedding into logic rule learning for knowledge graph reasoning" paper
    (Li et al.): a :class:`RuleReasoner` whose operators are
    :math:`\mathbf{B}_k[e, j] = \mathbf{M}_k[e, j] \, \rho_{e,k}`, with
    :math:`\rho` from a :class:`DegreeEmbedding` of the observed graph,
    trained end to end.

    Args:
        num_relations (int): The number :math:`R` of KG relations.
        num_steps (int, optional): The maximum rule length :math:`L`.
            (default: :obj:`2`)
        rank (int, optional): The rank :math:`T`. (default: :obj:`3`)
        embedding_dim (int, optional): Size of the query and degree-type
            embeddings. (default: :obj:`128`)
        hidden_channels (int, optional): Hidden size of each LSTM direction.
            (default: :obj:`128`)
        eps (float, optional): The :math:`\epsilon` of the normalisation.
            (default: :obj:`1e-20`)
        recompute (bool, optional): Memory-lean training, see
            :class:`RuleReasoner`. (default: :obj:`False`)
    """
    def __init__(self, num_relations: int, num_steps: int = 2, rank: int = 3,
                 embedding_dim: int = 128, hidden_channels: int = 128,
                 eps: float = 1e-20, recompute: bool = False):
        super().__init__(num_relations, num_steps, rank, embedding_dim,
                         hidden_channels, eps, recompute)
        self.degree_embedding = DegreeEmbedding(2 * num_relations,
                                                embedding_dim, hidden_channels)

    def reset_parameters(self):
        super().reset_parameters()
        # RuleReasoner.__init__ calls this before the layer exists (and the
        # layer initialises itself).
        if hasattr(self, 'degree_embedding'):
            self.degree_embedding.reset_parameters()

    has_edge_weight = True

    def edge_weight(self, graph: TypedGraph,
                    nodes: Optional[Tensor] = None) -> SourceWeights:
        return self.degree_embedding.source_weights(graph.degree, nodes)
