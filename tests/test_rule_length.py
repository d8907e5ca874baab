import pytest
import torch

from pyg_degreembed import from_edge_index
from pyg_degreembed.interpret.rule_length import choose_num_steps, reach_shares

from conftest import chain_kg


def three_hop_kg(n=20):
    # q(x_i, y_i) holds exactly when x_i -a-> u_i -b-> v_i -c-> y_i; the
    # entities are x_i = i, u_i = n + i, v_i = 2n + i, y_i = 3n + i.
    i = torch.arange(n)
    x, u, v, y = i, n + i, 2 * n + i, 3 * n + i
    facts = torch.cat([torch.stack([x, torch.full_like(i, 0), u]),
                       torch.stack([u, torch.full_like(i, 1), v]),
                       torch.stack([v, torch.full_like(i, 2), y])], dim=1)
    train = torch.stack([x, torch.full_like(i, 3), y])
    return from_edge_index(train[[0, 2]], train[1], num_nodes=4 * n,
                           num_relations=4, splits={'facts': facts})


def test_answers_exactly_three_hops_away():
    data = three_hop_kg()
    shares = reach_shares(data, max_steps=4)
    assert shares == [0., 0., 1., 1.]
    assert choose_num_steps(shares) == 3
    assert choose_num_steps(shares[:3]) == 3
    # The paper's length is the floor, the steps measured the ceiling.
    assert choose_num_steps(shares, min_gain=1.5) == 2
    assert choose_num_steps(shares[:2]) == 2


def test_two_hop_rules_keep_the_papers_length():
    data = chain_kg()
    shares = reach_shares(data, max_steps=3, num_queries=50)
    assert shares[1] == shares[2] == 1.
    assert choose_num_steps(shares) == 2


def test_the_sample_is_seeded_and_bounded():
    data = chain_kg()
    a = reach_shares(data, max_steps=2, num_queries=7, seed=3)
    assert a == reach_shares(data, max_steps=2, num_queries=7, seed=3)
    # Shares of 7 queries are multiples of 1 / 7.
    assert all(abs(s * 7 - round(s * 7)) < 1e-9 for s in a)
    with pytest.raises(ValueError, match='2 steps'):
        choose_num_steps(a[:1])


@pytest.mark.parametrize('seed', range(3))
def test_shares_against_dense_walks(seed):
    # Every training query (num_queries above their number), tail and head
    # query of each training triple, on the graph without that triple (in
    # either direction): its answer is within l edges if a walk of 1..l
    # edges reaches it, by powers of the adjacency matrix.
    gen = torch.Generator().manual_seed(seed)
    N, R = 12, 3
    triples = torch.unique(torch.stack([
        torch.randint(0, N, (30, ), generator=gen),
        torch.randint(0, R, (30, ), generator=gen),
        torch.randint(0, N, (30, ), generator=gen)]), dim=1)
    facts, train = triples[:, :12], triples[:, 12:]
    data = from_edge_index(train[[0, 2]], train[1], num_nodes=N,
                           num_relations=R, splits={'facts': facts})
    triples = triples.t().tolist()
    within = torch.zeros(4)
    for removed in triples[12:]:
        adjacency = torch.zeros(N, N)
        for a, _, b in (triple for triple in triples if triple != removed):
            adjacency[a, b] += 1
            adjacency[b, a] += 1
        walks, reached = torch.eye(N), torch.zeros(N, N, dtype=torch.bool)
        for length in range(4):
            walks = walks @ adjacency
            reached |= walks > 0
            a, _, b = removed
            within[length] += int(reached[a, b]) + int(reached[b, a])
    expected = (within / (2 * len(triples[12:]))).tolist()
    shares = reach_shares(data, max_steps=4, num_queries=1000)
    assert shares == pytest.approx(expected)
    assert shares[1] < shares[3]
