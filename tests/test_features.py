import torch

from pyg_degreembed import degree_sets
from pyg_degreembed.data.features import extend_trie, prefix_trie


def sets_of(degree, num_nodes):
    out = []
    for e in range(num_nodes):
        row = degree.index[e]
        out.append(degree.tokens[row, :degree.lengths[row]].tolist())
    return out


def test_degree_sets_of_toy_kg(toy_kg):
    # R = 3: types 0 parentOf, 1 siblingOf, 2 spouseOf, 3..5 their inverses.
    degree = degree_sets(toy_kg.edge_index, toy_kg.edge_type, 6, 6)
    assert sets_of(degree, 6) == [
        [0, 2, 5],  # 0: parent, spouse, spouse^-1
        [0, 2, 5],  # 1: same set as 0
        [1, 3, 4],  # 2: sibling, parent^-1 (child), sibling^-1
        [0, 1, 3, 4],  # 3: also parent of 4
        [3],  # 4: child only
        [6],  # 5: no edges -> the "no edges" token K = 6
    ]
    # Shared sets are stored once.
    assert degree.tokens.size(0) == 5
    assert degree.index[0] == degree.index[1]


def test_degree_sets_ignore_counts_and_keep_direction():
    edge_index = torch.tensor([[0, 0, 0], [1, 1, 2]])
    edge_type = torch.tensor([0, 0, 0])
    degree = degree_sets(edge_index, edge_type, 3, 2)
    assert sets_of(degree, 3) == [[0], [2], [2]]


def test_valid_and_test_edges_do_not_feed_degree_features(toy_kg):
    # The valid triple (2, parentOf, 4) and the test triple
    # (4, siblingOf, 4) are not edges: entity 4 keeps only "child of".
    degree = degree_sets(toy_kg.edge_index, toy_kg.edge_type, 6, 6)
    assert sets_of(degree, 6)[4] == [3]


def test_prefix_trie_reads_every_prefix_once():
    tokens = torch.tensor([[0, 1, 2], [0, 1, 9], [0, 3, 9], [4, 9, 9]])
    lengths = torch.tensor([3, 2, 2, 1])
    trie = prefix_trie(tokens, lengths)
    # Distinct prefixes: (0) (4) | (0,1) (0,3) | (0,1,2)
    assert trie.level_ptr.tolist() == [0, 2, 4, 5]

    def spelled(node):
        out = []
        while node >= 0:
            out.append(int(trie.token[node]))
            node = int(trie.parent[node])
        return out[::-1]

    assert [spelled(int(n)) for n in trie.leaf] == [[0, 1, 2], [0, 1], [0, 3],
                                                    [4]]


def test_degree_sets_without_query_edges_equal_rebuilt_graphs(random_graph):
    from pyg_degreembed import TypedGraph
    from pyg_degreembed.data.kg import query_edges
    edge_index, edge_type, N, K = random_graph
    graph = TypedGraph(*random_graph)
    # Edge 0 is duplicated (both copies leave), 45 is a self-loop (its
    # entity loses the type and its inverse), 3 is moved off the graph.
    edges = torch.tensor([0, 45, 10, 3, 17, 60])
    head, relation = edge_index[0, edges], edge_type[edges]
    tail = edge_index[1, edges].clone()
    tail[3] = (tail[3] + 1) % N
    keys, base, rows, lengths = graph.degree_without(
        *query_edges(head, relation, tail, K // 2))
    assert torch.equal(base, graph.degree.index[keys % N])
    assert torch.equal(lengths, (rows != K).sum(1).clamp(min=1))
    changed = {(int(k) // N, int(k) % N): rows[i]
               for i, k in enumerate(keys)}
    assert (1, 3) in changed and len(changed) >= 4
    for b in range(edges.numel()):
        src, typ, dst, _ = query_edges(head[b:b + 1], relation[b:b + 1],
                                       tail[b:b + 1], K // 2)
        keep = torch.ones(edge_type.numel(), dtype=torch.bool)
        for s, k, d in zip(src.view(-1), typ.view(-1), dst.view(-1)):
            keep &= ~((edge_index[0] == s) & (edge_type == k) &
                      (edge_index[1] == d))
        rebuilt = degree_sets(edge_index[:, keep], edge_type[keep], N, K)
        for e in range(N):
            expected = rebuilt.tokens[rebuilt.index[e]]
            actual = changed.get((b, e), graph.degree.tokens[
                graph.degree.index[e]])
            assert torch.equal(actual[:expected.numel()], expected)
            assert bool((actual[expected.numel():] == K).all())


def read_back(trie, node):
    r"""The sequence of a trie node, walking up to the root."""
    out = []
    while node >= 0:
        out.append(int(trie.token[node]))
        node = int(trie.parent[node])
    return out[::-1]


def test_extend_trie_adds_sequences_that_share_prefixes():
    K = 9
    tokens = torch.tensor([[0, 2, 5, 7], [0, 2, 6, K], [3, K, K, K]])
    lengths = torch.tensor([4, 3, 1])
    trie = prefix_trie(tokens, lengths)
    # New sequences: one type dropped (middle, last, first), two dropped,
    # all dropped (the "no edges" token K).
    base = torch.tensor([0, 0, 0, 0, 2])
    new = torch.tensor([[0, 5, 7, K], [0, 2, 5, K], [2, 5, 7, K],
                        [0, 7, K, K], [K, K, K, K]])
    new_lengths = torch.tensor([3, 3, 3, 2, 1])
    out = extend_trie(trie, tokens[base], trie.leaf[base], new, new_lengths)
    for i in range(3):  # the old sequences are still there
        assert read_back(out, int(out.leaf[i])) == \
            tokens[i, :lengths[i]].tolist()
    for i in range(5):
        assert read_back(out, int(out.leaf[3 + i])) == \
            new[i, :new_lengths[i]].tolist()
    # Level order, parents one level up; shared prefixes reuse old nodes
    # ([0, 2, 5] is a prefix of an old sequence: no new node for it).
    level = torch.repeat_interleave(torch.arange(1, out.level_ptr.numel()),
                                    out.level_ptr.diff())
    has_parent = out.parent >= 0
    assert torch.equal(level[out.parent[has_parent]] + 1, level[has_parent])
    assert bool((level[~has_parent] == 1).all())
    added = out.token.numel() - trie.token.numel()
    # [0, 5, 7]: 2 after the shared [0]; [0, 2, 5]: none; [2, 5, 7]: 3;
    # [0, 7]: 1; [K]: 1.
    assert added == 2 + 0 + 3 + 1 + 1
