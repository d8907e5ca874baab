import pytest
import torch

from pyg_degreembed import from_edge_index
from pyg_degreembed.interpret.rule_length import (MIN_QUERIES,
                                                  choose_num_steps,
                                                  choose_rule_length,
                                                  reach_shares)

from conftest import chain_kg


def hops_kg(*lengths, n=20):
    # For each length h, n chains x -> z_1 -> ... -> z_h = y (step k by
    # relation k) and the training triple q(x, y), q the last relation.
    facts, train, num_nodes = [], [], 0
    q = max(lengths)
    for h in lengths:
        z = num_nodes + torch.arange((h + 1) * n).view(h + 1, n)
        num_nodes += z.numel()
        facts += [torch.stack([z[k], torch.full_like(z[k], k), z[k + 1]])
                  for k in range(h)]
        train.append(torch.stack([z[0], torch.full_like(z[0], q), z[h]]))
    train = torch.cat(train, dim=1)
    return from_edge_index(train[[0, 2]], train[1], num_nodes=num_nodes,
                           num_relations=q + 1,
                           splits={'facts': torch.cat(facts, dim=1)})


def test_answers_exactly_three_hops_away():
    data = hops_kg(3)
    shares = reach_shares(data, max_steps=4)
    assert shares == [0., 0., 1., 1.]
    assert choose_num_steps(shares) == 3
    assert choose_num_steps(shares[:3]) == 3
    # The paper's length is the floor, the steps measured the ceiling.
    assert choose_num_steps(shares, min_gain=1.5) == 2
    assert choose_num_steps(shares[:2]) == 2


def test_rule_length_measured_only_while_it_can_change():
    # Answers 1, ..., 6 edges away, a sixth each: every step reaches 1 / 6
    # more, up to the cap.
    data = hops_kg(1, 2, 3, 4, 5, 6)
    L, shares, _ = choose_rule_length(data, num_queries=1000)
    assert L == 5
    assert shares == pytest.approx([k / 6 for k in range(1, 6)])
    L, shares, _ = choose_rule_length(data, max_steps=3, num_queries=1000)
    assert L == 3 and len(shares) == 3
    # Every answer reached within 3 edges: no fourth step is measured.
    assert choose_rule_length(hops_kg(3), max_steps=5) == \
        (3, [0., 0., 1.], 40)
    # Answers 4 edges away: a third step reaches none of them, and the
    # rules keep the paper's length.
    assert choose_rule_length(hops_kg(4)) == (2, [0., 0., 0.], 40)
    with pytest.raises(ValueError, match='at least 2'):
        choose_rule_length(data, max_steps=1)


def test_two_hop_rules_keep_the_papers_length():
    data = chain_kg()
    shares = reach_shares(data, max_steps=3, num_queries=50)
    assert shares[1] == shares[2] == 1.
    assert choose_num_steps(shares) == 2
    # Every answer within 2 edges: a third step is not measured.
    assert choose_rule_length(data, num_queries=50) == (2, shares[:2], 50)


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


def test_a_gain_of_exactly_the_threshold_lengthens_the_rules():
    # Shares of 2000 queries: 1800/2000 -> 1900/2000 is exactly 5 % more,
    # though 0.95 - 0.9 is 0.04999... in floats.
    assert 0.95 - 0.9 < 0.05
    assert choose_num_steps([0.5, 0.9, 0.95, 0.96]) == 3
    assert choose_num_steps([0.5, 0.9, 1899 / 2000, 1.0]) == 2
    assert choose_num_steps([0.25, 0.5, 0.75], min_gain=0.25) == 3


def test_a_deadline_measures_the_queries_that_fit():
    # A deadline already passed: the first MIN_QUERIES of the seeded sample
    # only (in parts of 16), the shares of exactly those queries.
    data = chain_kg()
    assert MIN_QUERIES % 16 == 0
    late = reach_shares(data, 3, chunk_size=16, deadline=0.)
    assert late == reach_shares(data, 3, num_queries=MIN_QUERIES)
    assert late != reach_shares(data, 3, num_queries=16)
    L, shares, measured = choose_rule_length(data, time_limit=1e-9,
                                             chunk_size=16)
    assert L == choose_num_steps(shares) and measured == MIN_QUERIES
    assert choose_rule_length(data).num_queries == min(
        2000, 2 * data.train_edge_type.numel())
