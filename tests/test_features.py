import torch

from pyg_degreembed import degree_sets
from pyg_degreembed.features import prefix_trie


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
