r"""The parts of the benchmark scripts that decide what a result means: the
relation sample of ``benchmarks/rule_length.py`` (same graph, same filtered
ranks as on the full KG), the reachability share of
``benchmarks/inductive.py`` and the rho of ``variants.py``'s mean-one-rho,
against direct re-computations."""
import os
import sys

import pytest
import torch
from torch_geometric import seed_everything

from pyg_degreembed import DegreEmbedReasoner, RuleReasoner, compute_ranks
from pyg_degreembed.data.kg import SPLITS, kg_data, split_triples
from pyg_degreembed.evaluation.ranks import TIE_POLICIES

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'benchmarks'))
from inductive import reachable  # noqa: E402
from rule_length import restricted, sample_relations  # noqa: E402
from variants import mean_one  # noqa: E402


def random_kg(seed=0, N=25, R=6, n=260):
    gen = torch.Generator().manual_seed(seed)
    key = torch.unique(torch.randint(0, N * R * N, (n, ), generator=gen))
    key = key[torch.randperm(key.numel(), generator=gen)]
    triples = torch.stack([key // (R * N), (key // N) % R, key % N])
    cut = [int(f * key.numel()) for f in (0.08, 0.58, 0.73)]
    return kg_data(N, R, {'facts': triples[:, :cut[0]],
                          'train': triples[:, cut[0]:cut[1]],
                          'valid': triples[:, cut[1]:cut[2]],
                          'test': triples[:, cut[2]:]})


def graph_edges(data):
    observed = torch.cat([split_triples(data, s) for s in ('facts', 'train')],
                         dim=1)
    return sorted(map(tuple, observed.t().tolist()))


@pytest.mark.parametrize('share', [0.2, 0.5])
def test_sample_takes_tested_relations_until_their_share(share):
    data = random_kg()
    train = split_triples(data, 'train')[1]
    tested = set(split_triples(data, 'test')[1].tolist())
    chosen = sample_relations(data, share, seed=3)
    assert set(chosen) <= tested and chosen == sorted(chosen)
    count = {r: int((train == r).sum()) for r in chosen}
    assert sum(count.values()) >= share * train.numel()
    # Drawn only until the share is reached: without its largest relation
    # (so also without the last one drawn) the sample falls short.
    assert sum(count.values()) - max(count.values()) < share * train.numel()
    assert sample_relations(data, share, seed=3) == chosen


def test_restricted_kg_keeps_the_graph_and_the_filtered_ranks():
    data = random_kg()
    relations = torch.tensor([1, 4])
    small = restricted(data, relations)
    assert graph_edges(small) == graph_edges(data)
    for split in ('train', 'valid', 'test'):
        full = split_triples(data, split)
        kept = full[:, torch.isin(full[1], relations)]
        assert torch.equal(split_triples(small, split), kept), split
    seed_everything(0)
    model = DegreEmbedReasoner(6, embedding_dim=8, hidden_channels=8).eval()
    ranks = compute_ranks(model, small, 'test')
    reference = compute_ranks(model, data, split_triples(small, 'test'))
    for tie in TIE_POLICIES:
        assert torch.equal(ranks.ranks[tie], reference.ranks[tie]), tie
    # The other relations' valid and test triples are the only ones left
    # out.
    left_out = sum(int((~torch.isin(split_triples(data, s)[1], relations))
                       .sum()) for s in ('valid', 'test'))
    assert sum(split_triples(small, s).size(1) for s in SPLITS) + \
        left_out == sum(split_triples(data, s).size(1) for s in SPLITS)


def test_reachable_shares_against_dense_matrix_powers():
    data = random_kg(1, N=30, R=3, n=70)
    N = data.num_nodes
    adjacency = torch.zeros(N, N, dtype=torch.long)
    for h, _, t in graph_edges(data):  # inverse edges: both directions
        adjacency[h, t] = adjacency[t, h] = 1
    head, _, answer = split_triples(data, 'test')
    walks, first = torch.eye(N, dtype=torch.long), {}
    for hops in range(1, 4):
        walks = walks @ adjacency
        for i, (h, t) in enumerate(zip(head.tolist(), answer.tolist())):
            if walks[h, t] > 0:
                first.setdefault(i, hops)
    shares = reachable(data, 3)
    assert set(shares) == {1, 2, 3}
    for hops, share in shares.items():
        expected = sum(1 for k in first.values() if k <= hops) / head.numel()
        assert share == pytest.approx(expected)
    assert 0 < shares[1] < shares[3]


def test_mean_one_rho_is_k_times_the_papers_and_uniform_is_drum():
    data = random_kg(2)
    seed_everything(0)
    model = DegreEmbedReasoner(6, num_steps=2, embedding_dim=8,
                               hidden_channels=8).eval()
    head, relation, _ = split_triples(data, 'test')
    papers = model.edge_weight(data)
    assert torch.allclose(papers.sum(dim=1), torch.ones(data.num_nodes))
    mean_one(model)
    rho = model.edge_weight(data)
    assert torch.allclose(rho, 12 * papers)
    # With the output layer at zero, rho = 1 everywhere: DRUM's operators,
    # so the scores are those of DRUM with the same controllers.
    torch.nn.init.zeros_(model.edge_weight.lin.weight)
    torch.nn.init.zeros_(model.edge_weight.lin.bias)
    assert torch.allclose(model.edge_weight(data),
                          torch.ones(data.num_nodes, 12))
    drum = RuleReasoner(6, num_steps=2, embedding_dim=8,
                        hidden_channels=8).eval()
    drum.load_state_dict({k: v for k, v in model.state_dict().items()
                          if not k.startswith('edge_weight.')})
    assert torch.allclose(model(data, head, relation),
                          drum(data, head, relation), atol=1e-6)
