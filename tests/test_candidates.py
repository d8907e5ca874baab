r"""Sampled-candidate evaluation against its definition, recomputed in plain
Python: SplitMix64 on Python integers, the n filtered candidates with the
smallest keys, the rank counted by hand."""
import pytest
import torch
from torch_geometric.data import Data

from pyg_degreembed import (AppliedRules, RuleReasoner, compute_ranks,
                            evaluate)
from pyg_degreembed.evaluation.candidates import draw_candidates, splitmix64
from pyg_degreembed.evaluation.ranks import both_directions

MASK = (1 << 64) - 1


def splitmix64_reference(x: int) -> int:
    # The published SplitMix64 finaliser on unsigned 64-bit integers.
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def signed(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x


def unsigned(x: int) -> int:
    return x & MASK


def reference_draw(candidates, query, n, seed):
    # The n candidates with the smallest keys hash(seed, query, entity)
    # (compared as signed 64-bit integers, as torch orders int64).
    row = splitmix64_reference(unsigned(query) ^
                               splitmix64_reference(unsigned(seed)))
    key = {e: signed(splitmix64_reference((row + e) & MASK))
           for e in candidates}
    return sorted(sorted(candidates, key=key.get)[:n])


def test_splitmix64_matches_the_published_function():
    values = [0, 1, 2, 12345, -1, -(1 << 63), (1 << 63) - 1, 0x5DEECE66D]
    got = splitmix64(torch.tensor(values)).tolist()
    assert got == [signed(splitmix64_reference(unsigned(v))) for v in values]
    # The first outputs of SplitMix64 seeded with 0 (a published sequence:
    # the state advances by the golden ratio, each output is the mix).
    golden = 0x9E3779B97F4A7C15
    assert unsigned(got[0]) == 0xE220A8397B1DCDAF
    assert unsigned(int(splitmix64(torch.tensor([signed(golden)])))) == \
        0x6E789E6AA1B965F4


def test_draw_is_n_filtered_candidates_with_the_smallest_keys():
    gen = torch.Generator().manual_seed(0)
    B, N, n = 9, 40, 6
    candidate = torch.rand(B, N, generator=gen) < 0.6
    candidate[3] = False
    candidate[3, [5, 17]] = True  # fewer than n: all of them
    query = torch.tensor([0, 1, 2, 3, 7, 100, 2 ** 40, 5, 6])
    ids, drawn = draw_candidates(candidate, query, n, seed=11)
    for b in range(B):
        want = reference_draw(candidate[b].nonzero().view(-1).tolist(),
                              int(query[b]), n, 11)
        assert sorted(ids[b][drawn[b]].tolist()) == want
    assert drawn[3].sum() == 2
    # One row alone draws what it draws in a batch; another seed, others.
    alone = draw_candidates(candidate[4:5], query[4:5], n, seed=11)[0]
    assert sorted(alone[0].tolist()) == sorted(ids[4].tolist())
    other = draw_candidates(candidate, query, n, seed=12)[0]
    assert any(sorted(other[b].tolist()) != sorted(ids[b].tolist())
               for b in range(B))
    with pytest.raises(ValueError, match='at least 1'):
        draw_candidates(candidate, query, 0)


def test_draw_is_uniform_over_the_filtered_candidates():
    # Each of c candidates is drawn with probability n / c: over 4000
    # queries, every inclusion count within 5 standard deviations.
    Q, N, n = 4000, 30, 5
    candidate = torch.ones(Q, N, dtype=torch.bool)
    candidate[:, :10] = False  # 20 candidates
    ids, drawn = draw_candidates(candidate, torch.arange(Q), n)
    assert bool(drawn.all()) and not bool((ids < 10).any())
    counts = torch.bincount(ids.view(-1), minlength=N)[10:].double()
    p = n / 20
    sd = (Q * p * (1 - p)) ** 0.5
    assert ((counts - Q * p).abs() < 5 * sd).all()
    # Pairs too (without replacement, not n independent draws): two given
    # candidates together with probability n (n - 1) / (c (c - 1)).
    both = ((ids == 10).any(1) & (ids == 11).any(1)).sum().item()
    pair = n * (n - 1) / (20 * 19)
    assert abs(both - Q * pair) < 5 * (Q * pair * (1 - pair)) ** 0.5


class TableScorer(torch.nn.Module):
    r"""Fixed random scores with ties per (head, relation)."""
    def __init__(self, num_nodes, num_edge_types):
        super().__init__()
        gen = torch.Generator().manual_seed(1)
        self.table = torch.randint(0, 5, (num_nodes, num_edge_types,
                                          num_nodes), generator=gen).float()

    def forward(self, graph, head, relation):
        return self.table[head, relation]


def small_kg():
    gen = torch.Generator().manual_seed(0)
    N, R = 30, 3
    triples = torch.unique(torch.stack([
        torch.randint(0, N, (150, ), generator=gen),
        torch.randint(0, R, (150, ), generator=gen),
        torch.randint(0, N, (150, ), generator=gen)]), dim=1)
    triples = triples[:, torch.randperm(triples.size(1), generator=gen)]
    train, test = triples[:, :100], triples[:, 100:]
    return Data(edge_index=train[[0, 2]], edge_type=train[1], num_nodes=N,
                train_edge_index=train[[0, 2]], train_edge_type=train[1],
                test_edge_index=test[[0, 2]], test_edge_type=test[1],
                num_relations=R), test


def test_sampled_ranks_equal_their_brute_force_definition():
    kg, test = small_kg()
    N, R = kg.num_nodes, kg.num_relations
    model = TableScorer(N, 2 * R)
    n, seed = 7, 3
    ranks = compute_ranks(model, kg, 'test', batch_size=5, num_candidates=n,
                          candidate_seed=seed)
    known = set(map(tuple, torch.cat([
        torch.stack([kg.train_edge_index[0], kg.train_edge_type,
                     kg.train_edge_index[1]]), test], dim=1).t().tolist()))
    head, relation, answer = both_directions(test, R)
    for q, (h, r, t) in enumerate(zip(head.tolist(), relation.tolist(),
                                      answer.tolist())):
        def true(e):  # (h, r, e) known, in either direction
            return (h, r, e) in known if r < R else (e, r - R, h) in known
        candidates = [e for e in range(N) if e != t and not true(e)]
        drawn = reference_draw(candidates, q, n, seed)
        scores = model.table[h, r]
        better = sum(float(scores[e]) > float(scores[t]) for e in drawn)
        tied = sum(float(scores[e]) == float(scores[t]) for e in drawn)
        assert ranks.ranks['optimistic'][q] == 1 + better
        assert ranks.ranks['pessimistic'][q] == 1 + better + tied
        assert ranks.candidates[q] == len(drawn) == min(n, len(candidates))
    metrics = ranks.metrics()
    assert metrics['num_candidates'] == n
    assert metrics['mrr'] == pytest.approx(
        float((1 / ranks.ranks['realistic']).mean()))
    assert evaluate(model, kg, num_candidates=n,
                    candidate_seed=seed)['mrr'] == metrics['mrr']


def test_as_many_candidates_as_entities_is_the_full_ranking():
    kg, _ = small_kg()
    model = TableScorer(kg.num_nodes, 2 * kg.num_relations)
    full = compute_ranks(model, kg, 'test')
    sampled = compute_ranks(model, kg, 'test', num_candidates=kg.num_nodes)
    for tie in ('optimistic', 'pessimistic', 'realistic'):
        assert torch.equal(full.ranks[tie], sampled.ranks[tie])
    assert 'num_candidates' not in full.metrics()
    # Fewer candidates: never a worse rank than against all of them.
    fewer = compute_ranks(model, kg, 'test', num_candidates=5)
    assert bool((fewer.ranks['pessimistic'] <=
                 full.ranks['pessimistic']).all())
    assert bool((fewer.ranks['pessimistic'] <= 6).all())


class Untargeted(torch.nn.Module):
    r"""A scorer's scores of every entity (its forward takes no
    :obj:`targets`): what the sampled ranking of it compares with."""
    def __init__(self, scorer):
        super().__init__()
        self.scorer = scorer

    def forward(self, graph, head, relation):
        return self.scorer(graph, head, relation)


@pytest.mark.parametrize('aggregation', [('max-plus', 3, 0.),
                                         ('noisy-or', 5, 0.3)])
def test_rules_scoring_the_drawn_candidates_only_rank_as_all(aggregation):
    # compute_ranks with sampled candidates asks AppliedRules for the drawn
    # candidates and the answers only (forward's targets): the same ranks
    # as scoring every entity, answers sharing a query included.
    kg, _ = small_kg()
    R = kg.num_relations
    name, keys, weight = aggregation
    rules = AppliedRules.mine(kg, 2, min_support=1, aggregation=name,
                              num_keys=keys, model_weight=weight,
                              tie_break=RuleReasoner(R, num_steps=2).eval())
    called = []
    rules.register_forward_pre_hook(
        lambda module, args, kwargs: called.append('targets' in kwargs),
        with_kwargs=True)
    for n in (3, 12):
        called.clear()
        sampled = compute_ranks(rules, kg, 'test', batch_size=7,
                                num_candidates=n, candidate_seed=2)
        assert called and all(called)
        want = compute_ranks(Untargeted(rules), kg, 'test', batch_size=7,
                             num_candidates=n, candidate_seed=2)
        for tie in ('optimistic', 'pessimistic', 'realistic'):
            assert torch.equal(sampled.ranks[tie], want.ranks[tie])
        assert torch.equal(sampled.candidates, want.candidates)
