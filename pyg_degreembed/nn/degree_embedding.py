from typing import Optional

import torch
from torch import Tensor
from torch.nn import LSTM, Embedding, Linear, Module

from ..features import DegreeSets, PrefixTrie


class DegreeEmbedding(Module):
    r"""The degree embedding from the "DegreEmbed: incorporating entity
    embedding into logic rule learning for knowledge graph reasoning" paper
    (Li et al.).

    Each entity :math:`e` is described by the sorted set
    :math:`\mathcal{D}(e) = (k_1, \ldots, k_d)` of edge types that leave it
    (see :func:`~pyg_degreembed.features.degree_sets`).  The set is embedded
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

    The BiLSTM is an ordinary :class:`torch.nn.LSTM`, evaluated exactly but
    without padding and without repeating work: the forward direction reads
    each distinct prefix of the (sorted) degree-type sequences once, the
    backward direction each distinct suffix once, and the input projection
    is looked up per token (there are only :math:`K + 1` tokens).  On Family
    this reads 7.6k prefixes instead of 19k tokens.

    Args:
        num_edge_types (int): The number :math:`K` of edge types (:math:`2R`
            with inverse relations).
        embedding_dim (int, optional): Size :math:`m` of the degree-type
            embeddings. (default: :obj:`128`)
        hidden_channels (int, optional): Hidden size :math:`d` of each LSTM
            direction. (default: :obj:`128`)

    Shapes:
        - **input:** :class:`~pyg_degreembed.features.DegreeSets` of
          :math:`N` entities
        - **output:** :math:`\rho` of shape :math:`(N, K)`, rows summing to 1
    """
    def __init__(self, num_edge_types: int, embedding_dim: int = 128,
                 hidden_channels: int = 128):
        super().__init__()
        self.num_edge_types = num_edge_types
        self.embedding_dim = embedding_dim
        self.hidden_channels = hidden_channels
        # Token num_edge_types is the "no edges" token.
        self.embedding = Embedding(num_edge_types + 1, embedding_dim)
        self.lstm = LSTM(embedding_dim, hidden_channels, batch_first=True,
                         bidirectional=True)
        self.lin = Linear(2 * hidden_channels, num_edge_types)
        self.reset_parameters()

    def reset_parameters(self):
        self.embedding.reset_parameters()
        self.lstm.reset_parameters()
        self.lin.reset_parameters()

    def embed_sets(self, degree: DegreeSets,
                   sets: Optional[Tensor] = None) -> Tensor:
        r"""The embedding :math:`\mathbf{H}` of unique degree-type sets.

        Args:
            degree (DegreeSets): The degree-type sets of the graph.
            sets (torch.Tensor, optional): Ids of the sets to embed (rows of
                :obj:`degree.tokens`). (default: :obj:`None`, all)

        :rtype: :class:`torch.Tensor` of shape :obj:`[len(sets), 2d]`
        """
        if int(degree.tokens.max()) > self.num_edge_types:
            raise ValueError(
                f'Degree sets hold edge types up to '
                f'{int(degree.tokens.max())}, but this {self} was built for '
                f'{self.num_edge_types} edge types')
        if sets is None:
            sets = torch.arange(degree.tokens.size(0),
                                device=degree.tokens.device)
        forward = self._read(degree.forward_trie, sets, '')
        backward = self._read(degree.backward_trie, sets, '_reverse')
        return torch.cat([forward, backward], dim=-1)

    def _read(self, trie: PrefixTrie, sets: Tensor, suffix: str) -> Tensor:
        # One LSTM direction over the nodes of a prefix trie that lead to the
        # requested sequences, level by level; returns the final hidden
        # state of each requested sequence.
        w_hh = getattr(self.lstm, f'weight_hh_l0{suffix}')
        projection = (self.embedding.weight @ getattr(
            self.lstm, f'weight_ih_l0{suffix}').t() +
                      getattr(self.lstm, f'bias_ih_l0{suffix}') +
                      getattr(self.lstm, f'bias_hh_l0{suffix}'))
        ptr = trie.level_ptr.tolist()
        leaf = trie.leaf.index_select(0, sets)
        needed = torch.zeros(trie.token.numel(), dtype=torch.bool,
                             device=leaf.device)
        needed[leaf] = True
        for level in range(len(ptr) - 2, 0, -1):  # mark the ancestors
            lo, hi = ptr[level], ptr[level + 1]
            needed[trie.parent[lo:hi][needed[lo:hi]]] = True
        # position[node]: row of its state in the concatenated states.
        position = torch.full_like(trie.token, -1)
        states, h, c, offset = [], None, None, 0
        for level in range(len(ptr) - 1):
            lo, hi = ptr[level], ptr[level + 1]
            nodes = needed[lo:hi].nonzero().view(-1) + lo
            position[nodes] = torch.arange(offset, offset + nodes.numel(),
                                           device=nodes.device)
            gates = projection.index_select(0, trie.token[nodes])
            if level > 0:
                parent = position[trie.parent[nodes]] - prev_offset
                h, c = h.index_select(0, parent), c.index_select(0, parent)
                gates = gates + h @ w_hh.t()
            i, f, g, o = gates.chunk(4, dim=-1)
            i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
            c = i * g if level == 0 else f * c + i * g
            h = o * c.tanh()
            states.append(h)
            prev_offset, offset = offset, offset + nodes.numel()
        return torch.cat(states).index_select(0, position[leaf])

    def entity_embedding(self, degree: DegreeSets) -> Tensor:
        r"""The embedding :math:`\mathbf{H}_e` of every entity, shape
        :obj:`[N, 2d]`."""
        return self.embed_sets(degree)[degree.index]

    def forward(self, degree: DegreeSets,
                nodes: Optional[Tensor] = None) -> Tensor:
        r"""Returns :math:`\rho` of shape :obj:`[N, K]`.

        Args:
            degree (DegreeSets): The degree-type sets of the observed graph.
            nodes (torch.Tensor, optional): If given, only the rows of these
                entities are computed and the other rows are zero (for when
                only they can be the source of an edge that is used).
                (default: :obj:`None`, all rows)
        """
        if nodes is None:
            rho = torch.softmax(self.lin(self.embed_sets(degree)), dim=-1)
            return rho.index_select(0, degree.index)
        sets = torch.unique(degree.index[nodes])
        rho = torch.softmax(self.lin(self.embed_sets(degree, sets)), dim=-1)
        # Row of each set in `rho`; sets not computed point to a zero row.
        row = torch.full((degree.tokens.size(0), ), sets.numel(),
                         dtype=torch.long, device=sets.device)
        row[sets] = torch.arange(sets.numel(), device=sets.device)
        rho = torch.cat([rho, rho.new_zeros(1, rho.size(1))])
        return rho.index_select(0, row[degree.index])

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({self.num_edge_types}, '
                f'embedding_dim={self.embedding_dim}, '
                f'hidden_channels={self.hidden_channels})')
