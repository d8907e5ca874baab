import pytest
import torch

from pyg_degreembed import TrueAnswers, compute_ranks, evaluate, filtered_ranks
from pyg_degreembed.data.kg import all_triples, split_triples
from pyg_degreembed.evaluation.ranks import (Ranks, both_directions,
                                             rank_metrics)


def test_tie_policies_on_hand_made_scores():
    scores = torch.tensor([
        [0.9, 0.5, 0.5, 0.5, 0.1],  # target 2: one better, two tied
        [0.0, 0.0, 0.0, 0.0, 0.0],  # target 0: all tied
        [0.1, 0.9, 0.8, 0.0, 0.0],  # target 1: best
    ])
    ranks = filtered_ranks(scores, torch.tensor([2, 0, 1]))
    assert ranks['optimistic'].tolist() == [2, 1, 1]
    assert ranks['pessimistic'].tolist() == [4, 5, 1]
    assert ranks['realistic'].tolist() == [3, 3, 1]


def test_filtering_removes_other_true_answers_only():
    scores = torch.tensor([[0.9, 0.8, 0.5, 0.5, 0.7]])
    # Entities 0 and 3 are other true answers; 2 is the target (listed
    # among the true answers too, as in practice).
    true_pairs = (torch.tensor([0, 0, 0]), torch.tensor([0, 3, 2]))
    ranks = filtered_ranks(scores, torch.tensor([2]), true_pairs)
    # Better: 1 (0.8) and 4 (0.7); the tie with 3 is filtered away.
    assert ranks['optimistic'].tolist() == [3]
    assert ranks['pessimistic'].tolist() == [3]


def test_nan_scores_are_rejected():
    with pytest.raises(ValueError, match='NaN'):
        filtered_ranks(torch.tensor([[float('nan'), 1.]]), torch.tensor([1]))


def test_true_answers_lookup_matches_brute_force():
    gen = torch.Generator().manual_seed(0)
    N, R = 7, 3
    triples = torch.stack([torch.randint(0, N, (30, ), generator=gen),
                           torch.randint(0, R, (30, ), generator=gen),
                           torch.randint(0, N, (30, ), generator=gen)])
    index = TrueAnswers(triples, N, R)
    head, relation, _ = both_directions(triples, R)
    batch, answer = index.lookup(head, relation)
    for b in range(head.numel()):
        h, q = int(head[b]), int(relation[b])
        if q < R:
            expected = {int(t) for hh, r, t in triples.t() if hh == h
                        and r == q}
        else:
            expected = {int(hh) for hh, r, t in triples.t() if t == h
                        and r == q - R}
        assert set(answer[batch == b].tolist()) == expected


def test_rank_metrics():
    m = rank_metrics(torch.tensor([1., 2., 4., 20.]))
    assert m['mrr'] == pytest.approx((1 + 1 / 2 + 1 / 4 + 1 / 20) / 4)
    assert m['mr'] == pytest.approx(27 / 4)
    assert m['hits@1'] == 0.25 and m['hits@3'] == 0.5
    assert m['hits@10'] == 0.75 and m['num_queries'] == 4


def test_per_relation_metrics_pool_both_directions():
    ranks = Ranks({'realistic': torch.tensor([1., 2., 4., 1.])},
                  relation=torch.tensor([0, 1, 0, 1]),
                  direction=torch.tensor([0, 0, 1, 1]))
    m = ranks.metrics('realistic', relation_names=['a', 'b'])
    assert m['per_relation']['a']['mr'] == 2.5
    assert m['per_relation']['b']['mrr'] == pytest.approx(0.75)
    with pytest.raises(ValueError, match='tie'):
        ranks.metrics('random')


class Oracle(torch.nn.Module):
    r"""Scores every true tail of (h, q) with 1, everything else 0."""
    def __init__(self, true_answers):
        super().__init__()
        self.true_answers = true_answers

    def forward(self, graph, head, relation):
        scores = torch.zeros(head.numel(), self.true_answers.num_nodes)
        scores[self.true_answers.lookup(head, relation)] = 1.
        return scores


def test_compute_ranks_filters_both_directions(toy_kg):
    true_answers = TrueAnswers(all_triples(toy_kg), 6, 3)
    train = split_triples(toy_kg, 'train')
    ranks = compute_ranks(Oracle(true_answers), toy_kg, train,
                          batch_size=4)
    # Every answer ties only with other true answers, which are filtered.
    n = train.size(1)
    assert ranks.ranks['pessimistic'].tolist() == [1.] * (2 * n)
    assert ranks.direction.tolist() == [0] * n + [1] * n
    assert ranks.relation.tolist() == train[1].tolist() * 2


def test_compute_ranks_of_a_split_filters_every_known_triple(toy_kg):
    # The test triple (4, 1, 4): its head query competes with nothing that
    # is true; an oracle that knows only the training triples ranks it
    # behind no one (all score 0: realistic rank is the middle of 6).
    oracle = Oracle(TrueAnswers(split_triples(toy_kg, 'train'), 6, 3))
    ranks = compute_ranks(oracle, toy_kg, 'test')
    assert ranks.ranks['optimistic'].tolist() == [1., 1.]
    # Both queries tie with the 5 other entities (none filtered: the only
    # known answer of (4, sibling, ?) is 4 itself).
    assert ranks.ranks['pessimistic'].tolist() == [6., 6.]


def test_evaluate_returns_metrics_dict(toy_kg):
    toy_kg.relation_names = ['parent', 'sibling', 'spouse']
    true_answers = TrueAnswers(all_triples(toy_kg), 6, 3)
    m = evaluate(Oracle(true_answers), toy_kg, 'train')
    assert m['tie'] == 'realistic' and m['mrr'] == 1.0
    assert m['num_queries'] == 2 * toy_kg.train_edge_type.numel()
    assert set(m['per_relation']) == {'parent', 'sibling', 'spouse'}
    assert {'mr', 'hits@1', 'hits@3', 'hits@10'} <= set(m)


def test_training_triples_are_ranked_without_their_own_edge(toy_kg):
    # Reference: each query scored on the graph rebuilt without its edge
    # and that edge's inverse, ranked by hand (realistic ties, filtered).
    from pyg_degreembed import DegreEmbedReasoner, TypedGraph
    torch.manual_seed(0)
    model = DegreEmbedReasoner(3, embedding_dim=8, hidden_channels=6)
    ranks = compute_ranks(model, toy_kg, 'train').ranks['realistic']
    true_answers = TrueAnswers(all_triples(toy_kg), 6, 3)
    src, dst = toy_kg.edge_index
    typ = toy_kg.edge_type
    head, relation, answer = both_directions(split_triples(toy_kg, 'train'),
                                             3)
    expected = []
    for h, q, t in zip(head.tolist(), relation.tolist(), answer.tolist()):
        inverse = (q + 3) % 6
        keep = ~(((src == h) & (typ == q) & (dst == t)) |
                 ((src == t) & (typ == inverse) & (dst == h)))
        graph = TypedGraph(toy_kg.edge_index[:, keep], typ[keep], 6, 6)
        with torch.no_grad():
            scores = model(graph, torch.tensor([h]), torch.tensor([q]))[0]
        other = torch.ones(6, dtype=torch.bool)
        other[true_answers.lookup(torch.tensor([h]), torch.tensor([q]))[1]] \
            = False
        other[t] = False
        better = int((scores[other] > scores[t]).sum())
        tied = int((scores[other] == scores[t]).sum())
        expected.append(1 + better + tied / 2)
    assert ranks.tolist() == pytest.approx(expected)
    # With the edge kept, the edge answers its own query.
    kept = compute_ranks(model, toy_kg, 'train', remove_edge=False)
    assert kept.ranks['realistic'].mean() < ranks.mean()
    with pytest.raises(ValueError, match="Oracle's does not"):
        compute_ranks(Oracle(true_answers), toy_kg, 'train',
                      remove_edge=True)


class CountingScorer(torch.nn.Module):
    r"""Fixed random scores per (head, relation), with ties; records the
    queries it is asked for."""
    def __init__(self, num_nodes, num_edge_types):
        super().__init__()
        gen = torch.Generator().manual_seed(1)
        self.table = torch.randint(0, 4, (num_nodes, num_edge_types,
                                          num_nodes), generator=gen).float()
        self.asked = []

    def forward(self, graph, head, relation):
        self.asked += list(zip(head.tolist(), relation.tolist()))
        return self.table[head, relation]


def test_each_distinct_query_is_scored_once_and_ranks_all_its_answers():
    from torch_geometric.data import Data
    gen = torch.Generator().manual_seed(0)
    N, R = 6, 2
    # Many answers per (head, relation): queries repeat in both directions.
    triples = torch.stack([torch.randint(0, 2, (40, ), generator=gen),
                           torch.randint(0, R, (40, ), generator=gen),
                           torch.randint(0, N, (40, ), generator=gen)])
    triples = torch.unique(triples, dim=1)
    train, test = triples[:, ::2], triples[:, 1::2]
    kg = Data(edge_index=train[[0, 2]], edge_type=train[1], num_nodes=N,
              train_edge_type=train[1], train_edge_index=train[[0, 2]],
              test_edge_index=test[[0, 2]], test_edge_type=test[1],
              num_relations=R)
    model = CountingScorer(N, 2 * R)
    ranks = compute_ranks(model, kg, test, batch_size=3)
    head, relation, answer = both_directions(test, R)
    distinct = set(zip(head.tolist(), relation.tolist()))
    assert len(distinct) < head.numel()
    assert sorted(model.asked) == sorted(distinct)
    # Reference: every query ranked on its own row, in the original order.
    true_answers = TrueAnswers(torch.cat([train, test], dim=1), N, R)
    expected = filtered_ranks(model.table[head, relation], answer,
                              true_answers.lookup(head, relation))
    for tie in ('optimistic', 'pessimistic', 'realistic'):
        assert ranks.ranks[tie].tolist() == expected[tie].tolist()
    assert ranks.candidates.tolist() == expected['candidates'].tolist()


class MemoryScorer(CountingScorer):
    r"""CountingScorer that touches 20 MB per query, as a model's scores
    and intermediates over many entities do; records its batch sizes."""
    def __init__(self, num_nodes, num_edge_types):
        super().__init__(num_nodes, num_edge_types)
        self.sizes = []

    def forward(self, graph, head, relation):
        self.sizes.append(head.numel())
        work = torch.ones(head.numel(), 5 * 2**20)
        return super().forward(graph, head, relation) + 0 * work.sum()


def test_the_ranking_batch_is_sized_by_the_memory_one_query_takes(
        monkeypatch):
    # The first batch is one query, whose measured peak (20 MB and a
    # little) sizes the others to what fits 90 % of the memory available
    # (100 MB: 4 queries); the ranks are those of any batch size.
    import pyg_degreembed.training.budget as budget_module
    from pyg_degreembed.training.budget import resident_peak
    from test_candidates import small_kg
    if resident_peak(lambda: None) is None:
        pytest.skip('the resident set is not measured here')
    kg, _ = small_kg()
    model = MemoryScorer(kg.num_nodes, 2 * kg.num_relations)
    want = compute_ranks(model, kg, 'test', batch_size=2)
    monkeypatch.setattr(budget_module, 'available_memory',
                        lambda **_: 100 * 2**20)
    model.sizes = []
    got = compute_ranks(model, kg, 'test', batch_size=64)
    assert model.sizes[0] == 1 and sum(model.sizes) > 8
    assert all(2 <= size <= 4 for size in model.sizes[1:-1])
    assert got.ranks['realistic'].tolist() == \
        want.ranks['realistic'].tolist()
    # Plenty of memory: one query, then the batch size asked for.
    monkeypatch.setattr(budget_module, 'available_memory',
                        lambda **_: 2**40)
    model.sizes = []
    compute_ranks(model, kg, 'test', batch_size=3)
    assert model.sizes[:2] == [1, 3]
