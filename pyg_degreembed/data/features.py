r"""Degree features: the set of edge types leaving each entity."""
from typing import NamedTuple

import torch
from torch import Tensor
from torch_geometric.utils import cumsum, degree

from pyg_degreembed.data.ragged import ragged_arange


class PrefixTrie(NamedTuple):
    r"""The distinct prefixes of a set of token sequences, level by level, so
    that a recurrent network can read every distinct prefix once.

    Attributes:
        token (torch.Tensor): The last token of each node (prefix), nodes
            ordered by length, shape :obj:`[M]`.
        parent (torch.Tensor): Index of the node one token shorter, or
            :obj:`-1` for prefixes of length 1, shape :obj:`[M]`.
        level_ptr (torch.Tensor): Nodes of length :obj:`i` are
            :obj:`level_ptr[i-1]:level_ptr[i]`, shape :obj:`[S + 1]`.
        leaf (torch.Tensor): The node of each whole sequence, shape
            :obj:`[U]`.
    """
    token: Tensor
    parent: Tensor
    level_ptr: Tensor
    leaf: Tensor

    def to(self, device) -> 'PrefixTrie':
        return PrefixTrie(*(t.to(device) for t in self))


def prefix_trie(tokens: Tensor, lengths: Tensor) -> PrefixTrie:
    r"""Builds the :class:`PrefixTrie` of right-padded sequences
    :obj:`tokens` of shape :obj:`[U, S]` with lengths :obj:`[U]`."""
    U = tokens.size(0)
    device = tokens.device
    token, parent, sizes = [], [], []
    leaf = torch.empty(U, dtype=torch.long, device=device)
    prev_id = None  # for each sequence, its node at the previous level
    offset = prev_offset = 0
    for i in range(1, int(lengths.max()) + 1 if U else 1):
        rows = (lengths >= i).nonzero().view(-1)
        prefixes, inverse = torch.unique(tokens[rows, :i], dim=0,
                                         return_inverse=True)
        token.append(prefixes[:, -1])
        level_parent = torch.full((prefixes.size(0), ), -1, dtype=torch.long,
                                  device=device)
        if prev_id is not None:
            level_parent[inverse] = prev_id[rows] + prev_offset
        parent.append(level_parent)
        node_id = torch.full((U, ), -1, dtype=torch.long, device=device)
        node_id[rows] = inverse
        ends = lengths[rows] == i
        leaf[rows[ends]] = inverse[ends] + offset
        sizes.append(prefixes.size(0))
        prev_id, prev_offset = node_id, offset
        offset += prefixes.size(0)
    level_ptr = torch.tensor([0] + sizes, device=device).cumsum(0)
    empty = tokens.new_empty(0)
    return PrefixTrie(torch.cat(token) if token else empty,
                      torch.cat(parent) if parent else empty, level_ptr, leaf)


def extend_trie(trie: PrefixTrie, base: Tensor, base_leaf: Tensor,
                tokens: Tensor, lengths: Tensor) -> PrefixTrie:
    r"""Adds sequences to a :class:`PrefixTrie` that share a prefix with
    sequences already in it (a degree-type set without one or two of its
    types), without rebuilding it: new sequence :math:`m` reuses the trie
    nodes of its longest common prefix with :obj:`base[m]` and adds a chain
    of nodes for the rest.  No loop over levels but the walk up to the
    shared prefix (one gather per level).

    Args:
        trie (PrefixTrie): The trie.
        base (torch.Tensor): For each new sequence, a sequence of the trie,
            right-padded, shape :obj:`[M, S]`.
        base_leaf (torch.Tensor): The node of each :obj:`base` sequence,
            shape :obj:`[M]`.
        tokens (torch.Tensor): The new sequences, right-padded, shape
            :obj:`[M, S]`.
        lengths (torch.Tensor): Their lengths, shape :obj:`[M]`; each must
            differ from its :obj:`base` within :obj:`base`'s length.

    :rtype: :class:`PrefixTrie`: the trie with the new nodes (old nodes
        renumbered) whose :obj:`leaf` holds the old sequences, then the new
        ones (sequence :obj:`U + m` is new sequence :obj:`m`).
    """
    device = tokens.device
    M, S = tokens.shape
    position = torch.arange(S, device=device)
    # Shared prefix length: the first position where the sequences differ.
    differs = (base != tokens) | (position >= lengths.view(-1, 1))
    shared = differs.long().argmax(dim=1)
    # The node of the shared prefix (walk up from the base's leaf).
    old_level = torch.repeat_interleave(
        torch.arange(trie.level_ptr.numel() - 1, device=device) + 1,
        trie.level_ptr.diff())
    node = base_leaf.clone()
    for _ in range(int((old_level[node] - shared).max()) if M else 0):
        up = old_level[node] > shared
        node = torch.where(up, trie.parent[node], node)
    node = torch.where(shared > 0, node, -1)
    # A chain of new nodes for tokens[shared:lengths].
    count = lengths - shared
    seq, at = ragged_arange(shared, count)
    total = trie.token.numel()
    new_id = total + torch.arange(seq.numel(), device=device)
    first = at == shared[seq]
    new_parent = torch.where(first, node[seq], new_id - 1)
    new_level = at + 1
    # Merge the levels (stable: old nodes first within a level).
    level = torch.cat([old_level, new_level])
    order = torch.sort(level, stable=True).indices
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel(), device=device)
    parent = torch.cat([trie.parent, new_parent])[order]
    parent = torch.where(parent >= 0, rank[parent.clamp(min=0)], -1)
    token = torch.cat([trie.token, tokens[seq, at]])[order]
    level_ptr = torch.cat([trie.level_ptr[:1], torch.bincount(
        level - 1, minlength=max(trie.level_ptr.numel() - 1, 1)).cumsum(0)])
    last = torch.where(count > 0, total + count.cumsum(0) - 1, node)
    return PrefixTrie(token, parent, level_ptr,
                      rank[torch.cat([trie.leaf, last])])


def reverse_padded(tokens: Tensor, lengths: Tensor) -> Tensor:
    r"""Reverses each right-padded sequence within its length."""
    position = torch.arange(tokens.size(1), device=tokens.device)
    source = (lengths.view(-1, 1) - 1 - position).clamp(min=0)
    source = torch.where(position < lengths.view(-1, 1), source, position)
    return tokens.gather(1, source)


class DegreeSets(NamedTuple):
    r"""The degree-type sets of all entities, stored once per unique set.

    Attributes:
        tokens (torch.Tensor): Unique degree-type sequences, sorted ascending
            and right-padded, shape :obj:`[U, S]`.  Token :obj:`K` (the number
            of edge types) is the "no edges" token; padding positions hold
            :obj:`K` too and are never read (sequences are packed).
        lengths (torch.Tensor): Length of each unique sequence, shape
            :obj:`[U]` (at least 1).
        index (torch.Tensor): For each entity the row of its set in
            :obj:`tokens`, shape :obj:`[N]`.
        forward_trie (PrefixTrie): Distinct prefixes of the sequences.
        backward_trie (PrefixTrie): Distinct prefixes of the reversed
            sequences (i.e. distinct suffixes).
    """
    tokens: Tensor
    lengths: Tensor
    index: Tensor  # type: ignore[assignment]  # shadows tuple.index
    forward_trie: PrefixTrie
    backward_trie: PrefixTrie

    def to(self, device) -> 'DegreeSets':
        return DegreeSets(self.tokens.to(device), self.lengths.to(device),
                          self.index.to(device),
                          self.forward_trie.to(device),
                          self.backward_trie.to(device))


def source_type_pairs(edge_index: Tensor, edge_type: Tensor,
                      num_edge_types: int) -> Tensor:
    r"""The unique (source entity, edge type) pairs of a graph, encoded as
    :obj:`src * K + type` and sorted (by source, then type)."""
    return torch.unique(edge_index[0] * num_edge_types + edge_type)


def degree_sets(edge_index: Tensor, edge_type: Tensor, num_nodes: int,
                num_edge_types: int) -> DegreeSets:
    r"""Computes the degree-type set of every entity (Section 4.2 of the
    paper): entity :math:`e` has edge type :math:`k` in its set iff it has an
    out-edge of type :math:`k`.  With inverse edges added (type
    :math:`r + R`), an in-edge of :math:`r` is an out-edge of
    :math:`r + R`, so the direction is kept.  Presence, not counts.

    No Python loop over edges: the sets come from :func:`torch.unique` over
    :obj:`src * K + type`, and identical sets are merged with
    :func:`torch.unique` over rows.

    Args:
        edge_index (torch.Tensor): The observed graph, shape :obj:`[2, E]`.
        edge_type (torch.Tensor): Edge types in :obj:`[0, K)`, shape
            :obj:`[E]`.
        num_nodes (int): The number of entities :math:`N`.
        num_edge_types (int): The number of edge types :math:`K`.

    :rtype: :class:`DegreeSets`
    """
    return degree_sets_of_pairs(
        source_type_pairs(edge_index, edge_type, num_edge_types), num_nodes,
        num_edge_types)


def degree_sets_of_pairs(pairs: Tensor, num_nodes: int,
                         num_edge_types: int) -> DegreeSets:
    r""":func:`degree_sets` from the sorted unique pairs of
    :func:`source_type_pairs`."""
    K = num_edge_types
    src, typ = pairs // K, pairs % K
    lengths = degree(src, num_nodes, dtype=torch.long)
    position = torch.arange(pairs.numel(), device=pairs.device)
    position = position - cumsum(lengths)[:-1][src]

    width = max(int(lengths.max()) if num_nodes > 0 else 1, 1)
    padded = torch.full((num_nodes, width), K, dtype=torch.long,
                        device=pairs.device)
    padded[src, position] = typ
    # Entities without edges keep the single "no edges" token K.
    tokens, index = torch.unique(padded, dim=0, return_inverse=True)
    lengths = (tokens != K).sum(dim=1).clamp(min=1)
    return DegreeSets(tokens, lengths, index, prefix_trie(tokens, lengths),
                      prefix_trie(reverse_padded(tokens, lengths), lengths))
