import itertools
import math

import pytest
import torch

from pyg_degreembed import (RuleReasoner, compute_ranks, from_edge_index,
                            resolve_graph)
from pyg_degreembed.evaluation.ranks import Ranks
from pyg_degreembed.interpret.applied_rules import (Aggregation, AppliedRules,
                                                    _dense_rank,
                                                    _pack_rows, rule_counts,
                                                    type_counts)
from pyg_degreembed.interpret.constant_rules import ConstantRules
from pyg_degreembed.interpret import paths as paths_module
from pyg_degreembed.interpret.mining import mine_counts
from pyg_degreembed.interpret.paths import pattern_of
from pyg_degreembed.training import scorer as scorer_module
from pyg_degreembed.training.checkpoint import scorer_from_checkpoint
from pyg_degreembed.training.scorer import (AGGREGATION_SETTINGS,
                                            UNSEEN_CHOICES, PerRelationScorer,
                                            UnseenChoices,
                                            choose_scorer,
                                            chosen_reciprocal_ranks,
                                            preferred_choice,
                                            relation_choice)

from conftest import chain_kg, dense_operators, known_queries


def random_kg(seed=0, N=10, R=3, E=36):
    gen = torch.Generator().manual_seed(seed)
    triples = torch.stack([torch.randint(0, N, (E, ), generator=gen),
                           torch.randint(0, R, (E, ), generator=gen),
                           torch.randint(0, N, (E, ), generator=gen)])
    triples = torch.unique(triples, dim=1)
    triples = triples[:, torch.randperm(triples.size(1), generator=gen)]
    half = triples.size(1) // 2
    facts, train = triples[:, :half], triples[:, half:]
    return from_edge_index(train[[0, 2]], train[1], num_nodes=N,
                           num_relations=R, splits={'facts': facts})


def train_queries(data):
    # The queries (head, query relation, tail) of both directions of the
    # train triples.
    R = data.num_relations
    return (torch.cat([data.train_edge_index[0], data.train_edge_index[1]]),
            torch.cat([data.train_edge_type, data.train_edge_type + R]),
            torch.cat([data.train_edge_index[1], data.train_edge_index[0]]))


def brute_force_counts(data, L):
    R, N = data.num_relations, data.num_nodes
    K = 2 * R
    graph = resolve_graph(data, num_relations=R)
    edge_index = torch.stack([graph.edge_src, graph.edge_dst])
    edge_type = graph.edge_type
    M = dense_operators(edge_index, edge_type, N, K)
    queries = known_queries(data)

    def reach(M, body):
        out = M[body[0]]
        for k in body[1:]:
            out = out @ M[k]
        return out > 0

    out = {}
    for length in range(1, L + 1):
        for body in itertools.product(range(K), repeat=length):
            full = reach(M, body)
            full.fill_diagonal_(False)
            for q in range(K):
                support, reached = 0, 0
                for h, q_, t in queries:
                    if q_ != q:
                        continue
                    reached += int(full[h, t])
                    keep = ~(((edge_index[0] == h) & (edge_type == q) &
                              (edge_index[1] == t)) |
                             ((edge_index[0] == t) &
                              (edge_type == (q + R) % K) &
                              (edge_index[1] == h)))
                    without = dense_operators(edge_index[:, keep],
                                              edge_type[keep], N, K)
                    support += int(reach(without, body)[h, t])
                if support:
                    out[(q, body)] = (support,
                                      int(full.sum()) - reached + support)
    return out


@pytest.mark.parametrize('L, seed, dense', [
    (1, 0, False), (2, 0, False), (3, 0, False), (3, 1, True), (3, 2, True)])
def test_rule_counts_against_dense_products(L, seed, dense):
    # Dense: 8 entities, 2 relations, ~40 triples (self-loops and parallel
    # edges of other relations included), so that many paths of length 3
    # run through the query's own edge or its inverse, some twice.
    data = random_kg(seed, N=8, R=2, E=44) if dense else random_kg(seed)
    counts = rule_counts(data, L, chunk_size=3)
    K = 2 * data.num_relations
    got = {(int(q), pattern_of(int(p), K)): (int(s), int(g))
           for q, p, s, g in zip(*counts)}
    assert got == brute_force_counts(data, L)


def test_hand_worked_chain_rule():
    # r2(X,Y) <= r0(X,Z), r1(Z,Y) holds for every r2 triple and its body
    # joins exactly the r2 pairs; pairs with X = Y do not count.
    data = chain_kg()
    r2 = torch.cat([data[f'{split}_edge_index'] for split in
                    ('train', 'valid', 'test')], dim=1)
    body_pairs = int((r2[0] != r2[1]).sum())
    support = int((data.train_edge_index[0] != data.train_edge_index[1])
                  .sum())
    assert 50 < body_pairs <= 60 and support < body_pairs
    applied = AppliedRules.mine(data, num_steps=2, unseen=5.)
    assert not applied.type_confidence.any()  # not by default
    rules = {rule.body: rule.confidence for rule in applied.rules(2)}
    assert rules[(0, 1)] == pytest.approx(support / (body_pairs + 5))
    # The inverse query follows the inverse body, with the same counts.
    inverse = {rule.body: rule.confidence for rule in applied.rules(5)}
    assert inverse[(4, 3)] == pytest.approx(support / (body_pairs + 5))
    ranks = compute_ranks(applied, data, 'test')
    assert ranks.metrics('pessimistic')['mrr'] == 1.0


def lexicographic_ranks(rows):
    # Dense rank of each row among all rows, lexicographic, by sorting.
    ordered = sorted(set(map(tuple, rows.tolist())))
    return torch.tensor([ordered.index(tuple(r)) for r in rows.tolist()])


@pytest.mark.parametrize('aggregation,num_keys', [('max-plus', 2),
                                                  ('noisy-or', 5)])
def test_scores_order_candidates_by_their_best_rules(aggregation, num_keys):
    data = random_kg(seed=1)
    R, N = data.num_relations, data.num_nodes
    K = 2 * R
    applied = AppliedRules.mine(data, num_steps=2, min_support=1,
                                num_keys=num_keys, answer_types=False,
                                constants=False,  # path rules only
                                aggregation=aggregation)
    graph = resolve_graph(data, num_relations=R)
    M = dense_operators(torch.stack([graph.edge_src, graph.edge_dst]),
                        graph.edge_type, N, K)
    head = torch.arange(N).repeat_interleave(K)
    relation = torch.arange(K).repeat(N)
    keys = applied.rule_keys(graph, head, relation)
    scores = applied(data, head, relation)
    for b in range(head.numel()):
        fired = [[] for _ in range(N)]
        for rule in applied.rules(int(relation[b])):
            reached = M[rule.body[0]][head[b]]
            for k in rule.body[1:]:
                reached = reached @ M[k]
            for y in (reached > 0).nonzero().view(-1).tolist():
                if y != head[b]:
                    fired[y].append(rule.confidence)
        expected = torch.zeros(N, num_keys, dtype=torch.double)
        for y, confidences in enumerate(fired):
            best = sorted(confidences, reverse=True)[:num_keys]
            expected[y, :len(best)] = torch.tensor(best, dtype=torch.double)
        assert torch.equal(keys[b], expected)
        # Higher keys (compared best first; with noisy-or, its product
        # first, then the best three) give higher scores; equal keys equal
        # scores.
        order = expected
        if aggregation == 'noisy-or':
            noisy = 1 - (1 - expected).prod(dim=1, keepdim=True)
            order = torch.cat([noisy.round(decimals=12), expected[:, :3]], 1)
        assert torch.equal(lexicographic_ranks(order),
                           lexicographic_ranks(scores[b].view(-1, 1)))


@pytest.mark.parametrize('base', [4, 2 ** 30])
def test_dense_rank_of_packed_rows_equals_unique(base):
    # Rows (query, levels) with many repeats and a real-valued last column;
    # with base 2^30 the rows do not fit in one integer and are ranked
    # column by column.
    gen = torch.Generator().manual_seed(0)
    rows = torch.randint(0, 4, (300, 4), generator=gen)
    last = torch.randint(0, 3, (300, ), generator=gen).double() / 7
    packed = _pack_rows(rows, base)
    assert packed.shape == ((300, 1) if base == 4 else (300, 4))
    full = torch.cat([rows.double(), last.view(-1, 1)], dim=1)
    expected = torch.unique(full, dim=0, return_inverse=True)[1]
    assert torch.equal(_dense_rank(packed, last), expected)


class Arange(torch.nn.Module):
    def forward(self, graph, head, relation, remove_tail=None):
        N = graph.num_nodes
        return torch.arange(N).float().expand(head.numel(), N)


def test_tie_break_orders_equal_keys_only():
    data = random_kg(seed=2)
    applied = AppliedRules.mine(data, num_steps=2, min_support=1,
                                tie_break=Arange(), answer_types=False)
    head, relation = torch.tensor([0, 3, 7]), torch.tensor([0, 4, 2])
    graph = resolve_graph(data, num_relations=data.num_relations)
    keys = applied.rule_keys(graph, head, relation)
    scores = applied(data, head, relation)
    N = data.num_nodes
    for b in range(3):
        rows = torch.cat([keys[b], torch.arange(N).double().view(-1, 1)], 1)
        assert torch.equal(lexicographic_ranks(rows),
                           lexicographic_ranks(scores[b].view(-1, 1)))


def test_training_queries_do_not_see_their_own_edge():
    data = chain_kg()
    h, r, t = data.train_edge_index[0], data.train_edge_type, \
        data.train_edge_index[1]
    h, r, t = h[h != t], r[h != t], t[h != t]  # X = Y never counts
    graph = resolve_graph(data, num_relations=3)
    # Mined: r2(X,Y) <= r2(X,Y) answers no training query without its edge.
    mined = AppliedRules.mine(data, num_steps=1, min_support=1)
    assert (2, ) not in [rule.body for rule in mined.rules(2)]
    # Given by hand, it reaches each answer through the answer's own edge
    # only, which a training query does not see.
    rule = AppliedRules(3, 1, relation=torch.tensor([2]),
                        pattern=torch.tensor([3]),  # the body (2, )
                        confidence=torch.tensor([1.]))
    assert rule.rules(2)[0].body == (2, )
    at_answer = torch.arange(h.numel()), t
    assert rule.rule_keys(graph, h, r)[at_answer][:, 0].eq(1).all()
    assert rule.rule_keys(graph, h, r, remove_tail=t)[at_answer].eq(0).all()


def test_type_counts_against_brute_force():
    data = random_kg(seed=3)
    R = data.num_relations
    K = 2 * R
    graph = resolve_graph(data, num_relations=R)
    edges = list(zip(graph.edge_src.tolist(), graph.edge_type.tolist(),
                     graph.edge_dst.tolist()))
    queries = known_queries(data)
    support, groundings = type_counts(data, chunk_size=5)
    for q in range(K):
        heads = {x for x, q_, _ in queries if q_ == q}
        for s in range(K):
            typed = {a for a, k, _ in edges if k == s}
            expected = sum(
                any(a == y and k == s and not (k == (q + R) % K and b == x)
                    for a, k, b in edges)
                for x, q_, y in queries if q_ == q)
            assert int(support[q, s]) == expected
            assert int(groundings[q, s]) == len(heads) * len(typed)


def test_answer_types_order_what_no_path_rule_reaches():
    data = random_kg(seed=4, N=14, E=30)
    R, N = data.num_relations, data.num_nodes
    K = 2 * R
    applied = AppliedRules.mine(data, num_steps=1, min_support=1,
                                num_keys=1, tie_break=Arange(),
                                answer_types=True)
    graph = resolve_graph(data, num_relations=R)
    types = torch.zeros(N, K, dtype=torch.bool)
    types[graph.edge_src, graph.edge_type] = True
    head = torch.arange(N).repeat_interleave(K)
    relation = torch.arange(K).repeat(N)
    keys = applied.rule_keys(graph, head, relation)
    scores = applied(data, head, relation)
    assert applied.type_confidence.gt(0).any()
    for b in range(head.numel()):
        best_type = (applied.type_confidence[relation[b]] * types).amax(1)
        rows = torch.cat([keys[b], best_type.view(-1, 1),
                          torch.arange(N).double().view(-1, 1)], 1)
        assert torch.equal(lexicographic_ranks(rows),
                           lexicographic_ranks(scores[b].view(-1, 1)))


def test_explain_lists_the_rules_that_reach_the_answer():
    data = random_kg(seed=5)
    R, N = data.num_relations, data.num_nodes
    applied = AppliedRules.mine(data, num_steps=2, min_support=1,
                                answer_types=True)
    graph = resolve_graph(data, num_relations=R)
    head = torch.arange(N).repeat_interleave(2 * R)
    relation = torch.arange(2 * R).repeat(N)
    keys = applied.rule_keys(graph, head, relation)
    types = torch.zeros(N, 2 * R, dtype=torch.bool)
    types[graph.edge_src, graph.edge_type] = True
    explained = 0
    for b in range(head.numel()):
        h, q = int(head[b]), int(relation[b])
        for t in range(N):
            rules, best_type = applied.explain(data, h, q, t)
            got = sorted([r.confidence for r in rules], reverse=True)[:3]
            expected = [c for c in keys[b, t].tolist() if c > 0]
            assert got == expected
            explained += bool(rules)
            conf = applied.type_confidence[q] * types[t]
            if conf.max() > 0:
                assert best_type.confidence == float(conf.max())
                assert types[t, best_type.edge_type]
            else:
                assert best_type is None
    assert explained > 0
    texts = [rule.format(['r0', 'r1', 'r2']) for q in range(2 * R)
             for rule in applied.type_rules(q)]
    assert any(text.startswith('r0(X,Y) <= r') and text.count('(Y,_)') == 1
               for text in texts)
    assert any(text.startswith('r0(Y,X) <= r') and '(_,Y)' in text
               for text in texts)


def ranks_of(values, relation, direction):
    return Ranks({'realistic': torch.tensor(values, dtype=torch.double)},
                 torch.tensor(relation), torch.tensor(direction))


def test_relation_choice_on_hand_worked_ranks():
    # Without the shrinkage (k = 0): each relation's own MRR.
    ranks = ranks_of
    # R = 2: query relations 0, 1 (tail queries), 2, 3 (head queries).
    relation, direction = [0, 0, 1, 1, 0], [0, 0, 0, 1, 1]
    model = ranks([1, 4, 2, 1, 3], relation, direction)
    rules = ranks([2, 2, 1, 1, 1], relation, direction)
    # q = 0: model 1/1 + 1/4 = 1.25 > rules 1/2 + 1/2; q = 1: rules better;
    # q = 3: equal (the earlier option); q = 2: model 1/3 < rules 1/1.
    assert relation_choice([rules, model], 2, 0.).tolist() == [1, 0, 0, 0]
    assert relation_choice([model, rules], 2, 0.).tolist() == [0, 1, 1, 0]
    # Three options: q = 0 prefers the third (1 + 1/2 > 1.25).
    third = ranks([1, 2, 3, 3, 2], relation, direction)
    assert relation_choice([rules, model, third], 2, 0.).tolist() == \
        [2, 0, 0, 0]
    # The reciprocal ranks each query gets from its relation's choice.
    assert chosen_reciprocal_ranks([rules, model, third], torch.tensor(
        [2, 0, 1, 1])).tolist() == [1, 1 / 2, 1, 1, 1 / 3]
    # No validation queries of a relation (q = 2, 3): the ranking chosen
    # overall, the model where it is better beyond noise (by 1/2 on each of
    # four queries) ...
    model = ranks([1, 1, 1, 1], [0, 1, 0, 1], [0, 0, 0, 0])
    rules = ranks([2, 2, 2, 2], [0, 1, 0, 1], [0, 0, 0, 0])
    assert relation_choice([rules, model], 2, 0.).tolist() == [1, 1, 1, 1]
    # ... the first where its lead is within noise (1 + 1 against 1 + 1/2:
    # a mean of 1/4, two standard errors 1/2).
    model = ranks([1, 1], [0, 1], [0, 0])
    rules = ranks([1, 2], [0, 1], [0, 0])
    assert relation_choice([rules, model], 2, 0.).tolist() == [0, 1, 0, 0]
    assert relation_choice([model, rules], 2, 0.).tolist() == [0, 0, 0, 0]


def test_relation_choice_shrinks_towards_the_overall_mrr():
    # k = PRIOR_QUERIES = 10. 30 queries of q = 0, reciprocal ranks model 1,
    # rules 1/2; 30 of q = 1, model 1/5, rules 1; one of q = 2 (relation 0,
    # head query), model 1, rules 1/2. Overall: model 37/61 = 0.607, rules
    # 45.5/61 = 0.746.
    relation = [0] * 30 + [1] * 30 + [0]
    direction = [0] * 60 + [1]
    model = ranks_of([1] * 30 + [5] * 30 + [1], relation, direction)
    rules = ranks_of([2] * 30 + [1] * 30 + [2], relation, direction)
    # q = 0: model (30 + 10 * 0.607) / 40 = 0.90 > rules (15 + 7.46) / 40;
    # q = 1: rules; q = 2: model (1 + 6.07) / 11 = 0.64 < rules (0.5 +
    # 7.46) / 11 = 0.72, its one query does not outweigh the overall
    # difference (without the shrinkage it would: 1 > 1/2); q = 3, no
    # query: the better overall, the rules.
    assert relation_choice([rules, model], 2).tolist() == [1, 0, 0, 0]
    # The model first (preferred): the rules' lead (0.139 per query) is
    # within noise (two standard errors 0.168), so both are shrunk towards
    # the model's 0.607 and q = 2 takes the model on its one query (1 >
    # 1/2); q = 3 too, the model being chosen overall.
    assert relation_choice([model, rules], 2).tolist() == [0, 1, 0, 0]


def test_a_lead_within_noise_does_not_carry_every_relation():
    # k = 10. Three queries: q = 0 model 1, rules 1/4; q = 1 model 1/2,
    # rules 1; q = 2 model 1, rules 1/5. Overall the model leads (0.833 vs
    # 0.483) but within noise (a mean difference of 0.35, two standard
    # errors 0.85): the rules are chosen overall and both are shrunk towards
    # their 0.483, so q = 1 keeps the rules on its own query (shrunk towards
    # each one's own MRR it would take the model: (1/2 + 8.33) / 11 >
    # (1 + 4.83) / 11), and q = 3, without a query, takes the rules.
    relation, direction = [0, 1, 0], [0, 0, 1]
    model = ranks_of([1, 2, 1], relation, direction)
    rules = ranks_of([4, 1, 5], relation, direction)
    assert preferred_choice([rules, model]) == 0
    assert relation_choice([rules, model], 2).tolist() == [1, 0, 1, 0]


def test_per_relation_scorer_takes_each_row_from_its_scorer():
    data = chain_kg()
    model = RuleReasoner(data.num_relations, num_steps=2).eval()
    applied = AppliedRules.mine(data, 2, tie_break=model)
    use_model = torch.tensor([True, False, False, True, True, False])
    mixed = PerRelationScorer(applied, use_model)
    head = torch.tensor([0, 1, 2, 3, 4, 5, 1])
    relation = torch.tensor([0, 1, 2, 3, 4, 5, 0])
    tail = torch.tensor([1, 2, 3, 4, 5, 0, 2])
    for extra in ({}, {'remove_tail': tail}):
        got = mixed(data, head, relation, **extra)
        for i in range(head.numel()):
            scorer = model if use_model[relation[i]] else applied
            row_extra = {k: v[i:i + 1] for k, v in extra.items()}
            expected = scorer(data, head[i:i + 1], relation[i:i + 1],
                              **row_extra)[0].double()
            if scorer is model:
                assert torch.allclose(got[i], expected)
            else:  # the tie-break's scale depends on the batch, not order
                def order(x):
                    return torch.unique(x, return_inverse=True)[1]
                assert torch.equal(order(got[i]), order(expected))
    none = torch.zeros(0, dtype=torch.long)
    assert mixed(data, none, none).shape == (0, data.num_nodes)
    with pytest.raises(ValueError, match='shape'):
        PerRelationScorer(applied, use_model[:3])


def test_preferred_choice_needs_a_gain_beyond_noise():
    def ranks(*values):
        return Ranks({'realistic': torch.tensor(values, dtype=torch.double)},
                     torch.zeros(4, dtype=torch.long),
                     torch.zeros(4, dtype=torch.long))

    preferred = ranks(2, 2, 2, 2)  # reciprocal ranks 0.5, MRR 0.5
    # MRR 0.625, but the gain (0.5, 0, 0, 0) has mean 0.125 and standard
    # error 0.25 / 2: under two of them.
    lucky = ranks(1, 2, 2, 2)
    steady = ranks(1.5, 1.5, 1.5, 1.5)  # 1/6 better on every query
    best = ranks(1, 1, 1, 1)
    assert preferred_choice([preferred, lucky]) == 0
    assert preferred_choice([preferred, lucky, steady]) == 2
    assert preferred_choice([preferred, best, steady]) == 1
    assert preferred_choice([lucky, preferred]) == 0
    assert preferred_choice([preferred]) == 0


def test_choose_scorer_per_query_relation_on_validation():
    data = chain_kg()
    R = data.num_relations
    model = RuleReasoner(R, num_steps=2)
    unseen = (200., 0.5)
    by_u = [AppliedRules.mine(data, 2, tie_break=model, unseen=u)
            for u in unseen]
    rules = [compute_ranks(applied, data, 'valid') for applied in by_u]
    mrr = [ranks.metrics()['mrr'] for ranks in rules]
    best = 0 if mrr[0] >= mrr[1] else 1
    model_ranks = compute_ranks(model, data, 'valid')
    expected = relation_choice([rules[best], model_ranks], R) == 1
    choice = choose_scorer(model, data, 2, unseen=unseen)
    name = 'model' if expected.all() else 'rules' if not expected.any() \
        else 'per-relation'
    assert choice.name == name and choice.unseen == unseen[best]
    for got, want in zip(choice.valid_ranks, rules + [model_ranks]):
        assert torch.equal(got.ranks['realistic'], want.ranks['realistic'])
    assert choice.applied.tie_break is model
    assert torch.equal(choice.applied.confidence, by_u[best].confidence)
    if name == 'per-relation':
        assert torch.equal(choice.use_model, expected)
        assert torch.equal(choice.scorer.use_model, expected)
    rules_only = choose_scorer(model, data, 2, scorer='rules', unseen=unseen)
    assert rules_only.name == 'rules' and rules_only.unseen == unseen[best]
    with pytest.raises(ValueError, match="'auto' or 'rules'"):
        choose_scorer(model, data, 2, scorer='model')
    with pytest.raises(ValueError, match='at least one'):
        choose_scorer(model, data, 2, unseen=())
    # u chosen under the first aggregation, then the aggregation under that
    # u (the earlier among equals), as ranking with each alone. (With a
    # model's weight too: the combined score.)
    pairs = (('max-plus', 3), ('noisy-or', 10), ('noisy-or', 2, 0.4))

    def alone(u, a):
        return compute_ranks(AppliedRules.mine(
            data, 2, tie_break=model, unseen=u, aggregation=a[0],
            num_keys=a[1], model_weight=a[2] if len(a) > 2 else 0.),
            data, 'valid')

    by_u = [alone(u, pairs[0]) for u in unseen]
    mrr = [ranks.metrics()['mrr'] for ranks in by_u]
    u = unseen[mrr.index(max(mrr))]
    by_aggregation = [alone(u, a) for a in pairs]
    mrr = [ranks.metrics()['mrr'] for ranks in by_aggregation]
    a = pairs[mrr.index(max(mrr))]
    both = choose_scorer(model, data, 2, scorer='rules', unseen=unseen,
                         aggregations=pairs)
    assert both.unseen == u and both.aggregation == Aggregation(*a)
    assert both.applied.setting == Aggregation(*a)
    assert both.reason.count('noisy-or') == 2
    assert both.reason.count('and the model (weight 0.4)') == 1
    for got, want in zip(both.valid_ranks + both.aggregation_ranks,
                         by_u + [model_ranks] + by_aggregation +
                         [model_ranks]):
        assert torch.equal(got.ranks['realistic'], want.ranks['realistic'])


class ValidationOracle(torch.nn.Module):
    r"""A stand-in model that knows the validation answers of one relation
    (both directions) and scores nothing else: it beats any rule there and
    loses to good rules elsewhere."""
    def __init__(self, triples, relation, num_relations, num_nodes):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))  # a device
        self.answers = {}
        for h, r, t in triples.t().tolist():
            if r == relation:
                self.answers[h, r] = t
                self.answers[t, r + num_relations] = h
        self.num_nodes = num_nodes

    def forward(self, graph, head, relation, remove_tail=None):
        out = torch.zeros(len(head), self.num_nodes)
        for i, (h, q) in enumerate(zip(torch.as_tensor(head).tolist(),
                                       torch.as_tensor(relation).tolist())):
            if (h, q) in self.answers:
                out[i, self.answers[h, q]] = 1.
        return out


def test_the_choice_per_relation_decides_where_each_scorer_wins(
        monkeypatch):
    # A prior of 10 queries, so that the 10 validation queries of r3 below
    # can decide. chain_kg's r2 = r0 then r1 (the rules answer every r2
    # query), and a
    # relation r3 whose training triples follow r0 (the rule r3 <= r0 is
    # confident) while its validation answers do not: the rules rank a
    # wrong answer first, the oracle the right one.
    base = chain_kg()
    a = base.facts_edge_index[1, :60]  # r0: x -> a[x]
    x = torch.arange(60)
    r3_train = torch.stack([x[:30], torch.full((30, ), 3), a[:30]])
    y = (a[30:40] + 7) % 60
    r3_valid = torch.stack([x[30:40], torch.full((10, ), 3), y])
    splits = {s: torch.cat([base[f'{s}_edge_index'][0:1],
                            base[f'{s}_edge_type'].view(1, -1),
                            base[f'{s}_edge_index'][1:2]])
              for s in ('facts', 'valid', 'test')}
    train = torch.cat([torch.stack([base.train_edge_index[0],
                                    base.train_edge_type,
                                    base.train_edge_index[1]]), r3_train], 1)
    splits['valid'] = torch.cat([splits['valid'], r3_valid], dim=1)
    data = from_edge_index(train[[0, 2]], train[1], num_nodes=60,
                           num_relations=4, splits=splits)
    oracle = ValidationOracle(r3_valid, 3, 4, 60)
    monkeypatch.setattr(scorer_module, 'SETTING_PRIOR_QUERIES', 10.)
    choice = choose_scorer(oracle, data, 2, unseen=(200., 5.),
                           aggregations=AGGREGATION_SETTINGS['max-plus'])
    # By construction: the model for r3 and inv_r3; the rules for r2 and
    # inv_r2 and, having the better MRR over all, where no query is.
    expected = torch.zeros(8, dtype=torch.bool)
    expected[[3, 7]] = True
    assert choice.name == 'per-relation'
    assert torch.equal(choice.use_model, expected)
    rules_ranks, model_ranks = choice.valid_ranks[0], choice.valid_ranks[-1]
    r3 = model_ranks.relation % 4 == 3
    assert (model_ranks.ranks['realistic'][r3] == 1).all()
    assert (rules_ranks.ranks['realistic'][r3] > 1).all()
    assert (rules_ranks.ranks['realistic'][~r3] == 1).all()
    # Combined, rules and model need no choice: the oracle's answer (its
    # evidence at least 0.1) outranks the wrong answers of r3 <= r0 (their
    # confidence 30 / (30 + 200), so rank 1 at u = 200 takes a weight of
    # 0.3 or more), and the rules' answers stay first elsewhere.
    both = choose_scorer(oracle, data, 2, unseen=(200., 5.))
    assert both.name == 'rules' and both.unseen == 200.
    assert both.aggregation.model_weight >= 0.3
    mrr = [r.metrics()['mrr'] for r in both.aggregation_ranks[:-1]]
    assert mrr.index(max(mrr)) > 0 and max(mrr) == 1.


def test_per_relation_scorer_from_a_checkpoint_payload():
    data = chain_kg()
    model = RuleReasoner(data.num_relations, num_steps=2).eval()
    applied = AppliedRules.mine(data, 2, tie_break=model)
    use_model = torch.tensor([True, False, False, True, True, False])
    payload = {'rules': applied.to_payload(), 'scorer': 'per-relation',
               'model_relations': use_model}
    scorer = scorer_from_checkpoint(payload, model)
    assert isinstance(scorer, PerRelationScorer)
    assert torch.equal(scorer.use_model, use_model)
    assert scorer.rules.constant_rules is not None
    assert scorer_from_checkpoint(payload, model, new_graph=True
                                  ).rules.constant_rules is None
    assert isinstance(scorer_from_checkpoint(payload, model, 'rules'),
                      AppliedRules)
    assert scorer_from_checkpoint(payload, model, 'model') is model


def test_each_query_relation_ranks_under_its_own_aggregation():
    # Per query relation the model, or the rules under one of three
    # aggregations: every query ranks as the rules mined with its
    # relation's aggregation (or the model) rank it alone (the rules'
    # scores, dense ranks over a batch, are the same up to each query's
    # order); a checkpoint keeps the settings, and on a new graph the
    # rules' own aggregation ranks.
    def order(scores):
        return torch.stack([torch.unique(row, return_inverse=True)[1]
                            for row in scores])

    data = random_kg(3, N=12, E=60)
    R = data.num_relations
    torch.manual_seed(3)
    model = RuleReasoner(R, num_steps=2).eval()
    settings = [Aggregation('max-plus', 3), Aggregation('noisy-or', 5),
                Aggregation('noisy-or', 2, 0.3)]
    applied = AppliedRules.mine(data, 2, min_support=1, tie_break=model)
    use_model = torch.arange(2 * R) % 4 == 3
    relation_setting = torch.arange(2 * R) % 3
    scorer = PerRelationScorer(applied, use_model, settings,
                               relation_setting)
    graph = resolve_graph(data, num_relations=R)
    head, relation, _ = train_queries(data)
    got = scorer(graph, head, relation)
    for q in range(2 * R):
        rows = relation == q
        if use_model[q]:
            want = model(graph, head[rows], relation[rows]).double()
            assert scorer.ranker(q) is model
        else:
            a = settings[int(relation_setting[q])]
            alone = AppliedRules.mine(data, 2, min_support=1,
                                      tie_break=model, aggregation=a.name,
                                      num_keys=a.num_keys,
                                      model_weight=a.model_weight)
            want = alone(graph, head[rows], relation[rows])
            assert scorer.ranker(q).setting == a
        assert torch.equal(order(got[rows]), order(want))
    # The rules' own tensors, not copies; their own aggregation unchanged.
    assert scorer.ranker(1).confidence is applied.confidence
    assert applied.setting == settings[0]
    payload = {'rules': applied.to_payload(), 'scorer': 'per-relation',
               'model_relations': use_model,
               'relation_settings': {'settings': [list(a) for a in settings],
                                     'index': relation_setting}}
    again = scorer_from_checkpoint(payload, model)
    assert torch.equal(again(graph, head, relation), got)
    assert torch.equal(
        scorer_from_checkpoint(payload, model, new_graph=True)
        .relation_setting, torch.zeros(2 * R, dtype=torch.long))
    with pytest.raises(ValueError, match="'relation_setting' must hold"):
        PerRelationScorer(applied, use_model, settings[:2], relation_setting)


def test_the_choice_per_relation_takes_each_relation_s_best_aggregation(
        monkeypatch):
    # Hand-made validation ranks of two aggregations and the model: q = 0
    # is best under the second aggregation, q = 1 under the first, q = 2
    # and 3 by the model; without shrinkage.
    relation, direction = [0, 0, 1, 1, 0, 1], [0, 0, 0, 0, 1, 1]
    first = ranks_of([3, 3, 1, 1, 2, 2], relation, direction)
    second = ranks_of([1, 1, 4, 4, 2, 2], relation, direction)
    model = ranks_of([5, 5, 5, 5, 1, 1], relation, direction)
    settings = [Aggregation('max-plus', 3), Aggregation('noisy-or', 50)]
    name, use_model, setting, words = scorer_module._per_relation(
        [first, second], model, 5., 2, 0., settings)
    assert name == 'per-relation'
    assert use_model.tolist() == [False, False, True, True]
    assert setting.tolist() == [1, 0, 0, 0]
    assert 'noisy-or of 50 rules for 1' in words
    # One aggregation wins everywhere the rules rank: no settings kept.
    name, use_model, setting, _ = scorer_module._per_relation(
        [first, first], model, 5., 2, 0., settings)
    assert setting is None and use_model.tolist() == [False, False, True,
                                                      True]


@pytest.mark.parametrize('seed', [0, 1, 2])
@pytest.mark.parametrize('leave_out', [False, True])
def test_scores_under_several_unseen_equal_each_mined_alone(seed, leave_out):
    # Firing once and scoring under each u gives what the rules mined with
    # that u score (u = 1e5 drops constant rules below MIN_CONFIDENCE), and
    # the tie-break's own scores last.
    data = random_kg(seed, N=12, E=60)
    R = data.num_relations
    torch.manual_seed(seed)
    model = RuleReasoner(R, num_steps=2).eval()
    unseen = (0.5, 200., 1e5)
    mined = [AppliedRules.mine(data, 2, min_support=1, unseen=u,
                               tie_break=model) for u in unseen]
    assert len(mined[2].constant_rules) < len(mined[0].constant_rules)
    graph = resolve_graph(data, num_relations=R)
    head, relation, tail = train_queries(data)
    extra = {'remove_tail': tail} if leave_out else {}
    scores = mined[0].score_with_unseen(graph, head, relation, unseen,
                                        **extra)
    assert scores.shape == (len(unseen) + 1, head.numel(), data.num_nodes)
    for got, applied in zip(scores, mined):
        assert torch.equal(got, applied(graph, head, relation, **extra))
    with torch.no_grad():  # as the rules run it
        assert torch.equal(scores[-1],
                           model(graph, head, relation, **extra).double())
    # Under each aggregation too (u first), as the rules mined with both.
    both = (('max-plus', 3), ('noisy-or', 5), ('max-plus', 1),
            ('noisy-or', 2, 0.3))
    scores = mined[0].score_with_unseen(graph, head, relation, unseen,
                                        aggregations=both, **extra)
    assert scores.shape[0] == len(both) * len(unseen) + 1
    for got, (u, a) in zip(scores, itertools.product(unseen, both)):
        applied = AppliedRules.mine(data, 2, min_support=1, unseen=u,
                                    tie_break=model, aggregation=a[0],
                                    num_keys=a[1], model_weight=a[2]
                                    if len(a) > 2 else 0.)
        assert torch.equal(got, applied(graph, head, relation, **extra))
    # Without the constant rules too (u, then with and without): as the
    # rules mined without them, clustered among themselves (their overlaps
    # measured on the same graph).
    both = (('max-plus', 3), ('noisy-or', 5), ('max-plus', 1),
            ('noisy-or', 2, 0., 0.5))
    mined[0].measure_overlap(data)
    scores = mined[0].score_with_unseen(graph, head, relation, unseen,
                                        aggregations=both,
                                        constants=(True, False), **extra)
    assert scores.shape[0] == len(unseen) * 2 * len(both) + 1
    for got, (u, constants, a) in zip(scores, itertools.product(
            unseen, (True, False), both)):
        applied = AppliedRules.mine(data, 2, min_support=1, unseen=u,
                                    tie_break=model, constants=constants,
                                    aggregation=a[0], num_keys=a[1],
                                    redundancy=a[3] if len(a) > 3 else None)
        assert torch.equal(got, applied(graph, head, relation, **extra))
        if not constants:  # the same rules as without_constants(u) gives
            alone = mined[0].without_constants(u)
            assert alone.constant_rules is None
            assert torch.equal(alone.confidence, applied.confidence)
    # compute_ranks ranks each at once: as ranking each alone.
    choices = UnseenChoices(mined[0], unseen)
    for got, want in zip(compute_ranks(choices, data, 'train'),
                         mined + [model]):
        assert torch.equal(got.ranks['realistic'],
                           compute_ranks(want, data, 'train')
                           .ranks['realistic'])
    with pytest.raises(ValueError, match='below the u'):
        mined[1].score_with_unseen(graph, head, relation, (0.5, ))
    with pytest.raises(ValueError, match='tie-break'):
        AppliedRules.mine(data, 2).score_with_unseen(graph, head, relation,
                                                     unseen)
    with pytest.raises(ValueError, match='answer-type'):
        AppliedRules.mine(data, 2, answer_types=True, tie_break=model
                          ).score_with_unseen(graph, head, relation, unseen)


def test_the_choice_for_new_graphs_ranks_without_the_constant_rules():
    # Made as the choice is (u beyond noise, then the model or the rules per
    # query relation), on the rules mined without constant rules.
    kg = random_kg(1, N=20, E=200)
    valid = torch.stack([kg.train_edge_index[0], kg.train_edge_type,
                         kg.train_edge_index[1]])[:, :30]
    data = from_edge_index(kg.train_edge_index[:, 30:],
                           kg.train_edge_type[30:], num_nodes=20,
                           num_relations=3,
                           splits={'facts': torch.stack([
                               kg.facts_edge_index[0], kg.facts_edge_type,
                               kg.facts_edge_index[1]]), 'valid': valid})
    R = data.num_relations
    torch.manual_seed(0)
    model = RuleReasoner(R, num_steps=2).eval()
    unseen = (200., 0.5)
    paths = [AppliedRules.mine(data, 2, tie_break=model, unseen=u,
                               constants=False) for u in unseen]
    assert len(AppliedRules.mine(data, 2).constant_rules)  # to leave out
    ranks = [compute_ranks(applied, data, 'valid') for applied in paths]
    best = preferred_choice(ranks)
    model_ranks = compute_ranks(model, data, 'valid')
    use_model = relation_choice([ranks[best], model_ranks], R) == 1
    choice = choose_scorer(model, data, 2, unseen=unseen)
    new_graph = choice.new_graph
    assert new_graph.unseen == unseen[best]
    assert new_graph.name == ('model' if use_model.all() else 'rules' if not
                              use_model.any() else 'per-relation')
    if new_graph.name == 'per-relation':
        assert torch.equal(new_graph.use_model, use_model)
    for u, mrr in zip(unseen, ranks):
        assert f"{mrr.metrics()['mrr']:.4f} (u = {u:g})" in new_graph.reason
    # The checkpoint's scorer on a new graph is that choice.
    payload = {'rules': choice.applied.to_payload(), 'scorer': choice.name,
               'model_relations': choice.use_model,
               'new_graph': new_graph.to_payload()}
    scorer = scorer_from_checkpoint(payload, model, new_graph=True)
    rules = scorer if isinstance(scorer, AppliedRules) else \
        getattr(scorer, 'rules', None)
    if rules is not None:
        assert rules.constant_rules is None
        assert torch.equal(rules.confidence, paths[best].confidence)
    # Recorded otherwise: the rules alone, under the u recorded.
    payload['new_graph'] = {'scorer': 'rules', 'unseen': unseen[1 - best],
                            'model_relations': None}
    rules = scorer_from_checkpoint(payload, model, new_graph=True)
    assert torch.equal(rules.confidence, paths[1 - best].confidence)
    assert torch.equal(
        compute_ranks(rules, data, 'valid').ranks['realistic'],
        ranks[1 - best].ranks['realistic'])
    assert scorer_from_checkpoint(payload, model, 'model',
                                  new_graph=True) is model
    payload['new_graph']['scorer'] = 'model'
    assert scorer_from_checkpoint(payload, model, new_graph=True) is model
    assert isinstance(scorer_from_checkpoint(payload, model, 'rules',
                                             new_graph=True), AppliedRules)
    # No constant rules, no other choice to make.
    assert choose_scorer(model, data, 2, unseen=unseen,
                         constants=False).new_graph is None
    assert choose_scorer(model, data, 2, unseen=unseen,
                         scorer='rules').new_graph.name == 'rules'


def test_rules_that_cannot_rank_leave_the_choice_to_the_model(monkeypatch):
    # On a graph whose hubs make the rules' paths too many to follow, the
    # choice falls back to the model (and says why); asking for the rules
    # is still an error.
    import pyg_degreembed.training.scorer as scorer_module
    from pyg_degreembed.training.budget import ResourceError
    data = chain_kg()
    model = RuleReasoner(data.num_relations, num_steps=2)

    def too_many(*args, **kwargs):
        raise ResourceError('Paths of length 3 from 256 start entities are '
                            'about 5.1e+12 walks, over the limit of 1e+10')

    monkeypatch.setattr(scorer_module, '_rank_until', too_many)
    choice = choose_scorer(model, data, 2)
    assert choice.name == 'model' and choice.scorer is model
    assert 'the applied rules cannot rank on this graph (Paths of length' \
        in choice.reason
    with pytest.raises(ResourceError, match='over the limit'):
        choose_scorer(model, data, 2, scorer='rules')


def test_the_choice_ranks_the_sampled_candidates_of_the_test_protocol(
        monkeypatch):
    # With sampled candidates the choice ranks validation against them (as
    # compute_ranks does with that draw), the rules' last edge read from
    # the candidates: where the paths of length L do not fit (as a hub's
    # on a large KG) but those of L - 1 do, the rules still rank; against
    # every entity, the model ranks.
    from pyg_degreembed.training.budget import ResourceError
    data = chain_kg()
    model = RuleReasoner(data.num_relations, num_steps=2).eval()
    mined = mine_counts(data, 2)
    full = choose_scorer(model, data, 2, mined=mined)
    assert 'sampled' not in full.reason

    def limited(size, message):
        if message.endswith('to length 2'):
            raise ResourceError(f'{message} needs about 19.0 GB of memory')

    monkeypatch.setattr(paths_module, 'check_memory', limited)
    assert choose_scorer(model, data, 2, mined=mined).name == 'model'
    choice = choose_scorer(model, data, 2, scorer='rules', mined=mined,
                           num_candidates=10, seed=3)
    assert 'validation MRR (10 sampled candidates): applied rules' in \
        choice.reason
    want = compute_ranks(model, data, 'valid', num_candidates=10,
                         candidate_seed=3)
    assert torch.equal(choice.valid_ranks[-1].ranks['realistic'],
                       want.ranks['realistic'])
    assert len(choice.valid_ranks) == len(UNSEEN_CHOICES) + 1
    assert all((ranks.ranks['pessimistic'] <= 11).all()
               for ranks in choice.valid_ranks)
    # The rules' ranks are those of the same rules ranked so.
    rules = AppliedRules.mine(data, 2, unseen=choice.unseen, tie_break=model,
                              counts=mined.counts,
                              constant_counts=mined.constant_counts)
    assert torch.equal(
        choice.valid_ranks[UNSEEN_CHOICES.index(choice.unseen)]
        .ranks['realistic'],
        compute_ranks(rules, data, 'valid', num_candidates=10,
                      candidate_seed=3).ranks['realistic'])


def test_noisy_or_aggregation_on_a_hand_worked_example():
    # Query r0 from entity 0. A = 1 is reached by a rule of confidence
    # 0.625, B = 2 by two rules of 0.5, C = 3 by one of 0.75; 4 by none.
    # Max-plus: C > A > B. Noisy-or: B = 1 - 0.5 * 0.5 = 0.75 = C, A
    # 0.625; the tie of B and C broken by max-plus: C > B > A.
    edge_index = torch.tensor([[0, 0, 0, 0], [1, 2, 2, 3]])
    edge_type = torch.tensor([1, 2, 3, 4])
    rules = dict(num_relations=5, num_steps=1,
                 relation=torch.zeros(4, dtype=torch.long),
                 pattern=torch.tensor([1, 2, 3, 4]) + 1,  # bodies (1,)..(4,)
                 confidence=torch.tensor([0.625, 0.5, 0.5, 0.75]))
    head, relation = torch.tensor([0]), torch.tensor([0])
    A, B, C, none = 1, 2, 3, 4

    def order(aggregation):
        model = AppliedRules(**rules, aggregation=aggregation)
        scores = model(edge_index, edge_type, head, relation,
                       num_nodes=5)[0]
        return sorted((A, B, C, none), key=lambda e: -float(scores[e])), \
            model

    assert order('max-plus')[0] == [C, A, B, none]
    noisy, model = order('noisy-or')
    assert noisy == [C, B, A, none]
    graph = resolve_graph(edge_index, edge_type, 5, num_relations=5)
    keys = model.rule_keys(graph, head, relation)[0]
    assert (1 - (1 - keys).prod(dim=-1))[[A, B, C]].tolist() == \
        [0.625, 0.75, 0.75]
    # Kept by a checkpoint's payload; max-plus payloads as before.
    again = AppliedRules.from_payload(model.to_payload())
    assert again.aggregation == 'noisy-or'
    assert 'aggregation' not in AppliedRules(**rules).config()
    with pytest.raises(ValueError, match="'aggregation' must be one of"):
        AppliedRules(**rules, aggregation='sum')


class FixedScores(torch.nn.Module):
    r"""A stand-in model: the same scores for every query."""
    def __init__(self, scores):
        super().__init__()
        self.register_buffer('scores', torch.tensor(scores))

    def forward(self, graph, head, relation, remove_tail=None):
        return self.scores.expand(head.numel(), -1)


def test_rules_and_model_combined_on_a_hand_worked_example():
    # The rules of the noisy-or example, and a model that scores A 1 and the
    # entity no rule reaches 4 (the query's best). With the model's weight
    # 0.9, its evidence is 0.9 for `none` and 0.9 / 4 = 0.225 for A:
    # none 0.9 > B = C = 0.75 (C first: its best rule is better) > A
    # 1 - 0.375 * 0.775 = 0.709375.
    edge_index = torch.tensor([[0, 0, 0, 0], [1, 2, 2, 3]])
    edge_type = torch.tensor([1, 2, 3, 4])
    rules = dict(num_relations=5, num_steps=1,
                 relation=torch.zeros(4, dtype=torch.long),
                 pattern=torch.tensor([1, 2, 3, 4]) + 1,
                 confidence=torch.tensor([0.625, 0.5, 0.5, 0.75]),
                 aggregation='noisy-or',
                 tie_break=FixedScores([0., 1., 0., 0., 4.]))
    head, relation = torch.tensor([0]), torch.tensor([0])
    A, B, C, none = 1, 2, 3, 4
    combined = AppliedRules(**rules, model_weight=0.9)
    graph = resolve_graph(edge_index, edge_type, 5, num_relations=5)
    scores = combined(graph, head, relation)[0]
    assert sorted((A, B, C, none), key=lambda e: -float(scores[e])) == \
        [none, C, B, A]
    assert scores[[A, B, C, none]].tolist() == pytest.approx(
        [0.709375, 0.75, 0.75, 0.9], abs=1e-8)
    assert float(scores[C]) > float(scores[B])
    # A query that no rule answers: the model's evidence alone.
    assert combined(graph, torch.tensor([4]), relation)[0].tolist() == \
        pytest.approx([0., 0.225, 0., 0., 0.9], abs=1e-8)
    # The parts shown: A's rule and the model; in evidence -log(1 - p)
    # they add up to the score's.
    evidence = combined.evidence(graph, 0, 0, A)
    assert [p for _, p in evidence.parts] == pytest.approx([0.625, 0.225])
    assert [rule.body for rule, _ in evidence.parts[:1]] == [(1, )]
    assert evidence.parts[1][0] == 'model'
    assert evidence.score == pytest.approx(float(scores[A]), abs=1e-8)
    assert sum(evidence.weights) == pytest.approx(
        -math.log(1 - evidence.score))
    assert combined.evidence(graph, 0, 0, B).score == pytest.approx(0.75)
    # Without the model's weight: the noisy-or ranking; kept by a payload.
    plain = AppliedRules(**rules)
    assert [p for _, p in plain.evidence(graph, 0, 0, A).parts] == [0.625]
    again = AppliedRules.from_payload(combined.to_payload(),
                                      tie_break=rules['tie_break'])
    assert again.model_weight == 0.9
    assert torch.equal(again(graph, head, relation), combined(
        graph, head, relation))
    assert 'model_weight' not in plain.config()
    for bad, match in ((dict(model_weight=1.), r'in \[0, 1\)'),
                       (dict(model_weight=0.5, aggregation='max-plus'),
                        'not to .max-plus.')):
        with pytest.raises(ValueError, match=match):
            AppliedRules(**{**rules, **bad})
    with pytest.raises(ValueError, match='needs the model'):
        AppliedRules(**{**rules, 'tie_break': None}, model_weight=0.5)(
            graph, head, relation)
    with pytest.raises(ValueError, match='max-plus ranks'):
        AppliedRules(**{**rules, 'aggregation': 'max-plus'}).evidence(
            graph, 0, 0, A)


@pytest.mark.parametrize('aggregation', [('max-plus', 3, 0.),
                                         ('noisy-or', 50, 0.3)])
def test_queries_scored_in_groups_rank_as_all_at_once(monkeypatch,
                                                      aggregation):
    # Each query its own group (as a hub's head is): every row orders the
    # entities as the whole batch scored at once does, in forward and under
    # several u; the queries' own edges left out alike.
    import pyg_degreembed.interpret.applied_rules as module
    data = chain_kg()
    model = RuleReasoner(data.num_relations, num_steps=2)
    name, keys, weight = aggregation
    applied = AppliedRules.mine(data, 2, unseen=5., tie_break=model,
                                aggregation=name, num_keys=keys,
                                model_weight=weight)
    graph = resolve_graph(data, num_relations=data.num_relations)
    head, relation = data.train_edge_index[0], data.train_edge_type
    tail = data.train_edge_index[1]

    def scores():
        return (applied(graph, head, relation),
                applied(graph, head, relation, remove_tail=tail),
                applied.score_with_unseen(graph, head, relation, (5., 50.)))

    together = scores()
    assert len(applied._groups(graph, head)[0]) == 1
    monkeypatch.setattr(module, 'GROUP_WALKS', 0)
    assert len(applied._groups(graph, head)[0]) == head.numel()

    def order(scores):  # each entity's place in its row
        rows = scores.reshape(-1, scores.size(-1))
        return torch.argsort(torch.argsort(rows, dim=1, stable=True), dim=1,
                             stable=True)

    for want, got in zip(together, scores()):
        assert got.shape == want.shape
        # The same order in every row (values may differ: the tie-break is
        # scaled by its batch's largest score).
        assert torch.equal(order(got), order(want))


@pytest.mark.parametrize('L', [1, 2, 3])
@pytest.mark.parametrize('seed', [0, 1])
def test_targets_are_scored_in_the_order_of_all_entities(L, seed):
    # Scoring only some entities (the last edge read from the targets'
    # side) orders them as scoring every entity does, in forward, under
    # several u and aggregations, and through the per-relation scorer;
    # every other entity scores -inf. Random KGs: paths through several
    # middle entities, constant rules, heads among the targets.
    data = random_kg(seed, N=12, E=60)
    R, N = data.num_relations, data.num_nodes
    torch.manual_seed(seed)
    model = RuleReasoner(R, num_steps=L).eval()
    graph = resolve_graph(data, num_relations=R)
    head = torch.arange(N).repeat(2 * R)
    relation = torch.arange(2 * R).repeat_interleave(N)
    gen = torch.Generator().manual_seed(seed)
    targets = torch.rand(head.numel(), N, generator=gen) < 0.4
    both = (('max-plus', 3), ('noisy-or', 5), ('noisy-or', 2, 0.3))
    applied = AppliedRules.mine(data, L, min_support=1, unseen=0.5,
                                tie_break=model)
    assert len(applied.constant_rules) and applied.rule_key.numel()
    use_model = torch.arange(2 * R) % 3 == 0
    pairs = [
        (applied(graph, head, relation),
         applied(graph, head, relation, targets=targets)),
        (applied.score_with_unseen(graph, head, relation, (0.5, 9.),
                                   aggregations=both),
         applied.score_with_unseen(graph, head, relation, (0.5, 9.),
                                   aggregations=both, targets=targets)),
        (PerRelationScorer(applied, use_model)(graph, head, relation),
         PerRelationScorer(applied, use_model)(graph, head, relation,
                                               targets=targets))]
    for a, *setting in both:
        rules = AppliedRules.mine(data, L, min_support=1, unseen=0.5,
                                  tie_break=model, aggregation=a,
                                  num_keys=setting[0],
                                  model_weight=setting[1]
                                  if len(setting) > 1 else 0.)
        pairs.append((rules(graph, head, relation),
                      rules(graph, head, relation, targets=targets)))
    for i, (full, part) in enumerate(pairs):
        full, part = full.reshape(-1, N), part.reshape(-1, N)
        mask = targets.repeat(full.size(0) // targets.size(0), 1)
        by_model = use_model[relation] if i == 2 else \
            torch.zeros(full.size(0), dtype=torch.bool)
        for row in range(full.size(0)):
            if by_model[row]:  # the model scores every entity
                assert torch.equal(part[row], full[row])
                continue
            f, p = full[row][mask[row]], part[row][mask[row]]
            assert torch.equal(torch.sign(f.view(-1, 1) - f.view(1, -1)),
                               torch.sign(p.view(-1, 1) - p.view(1, -1)))
            assert bool((part[row][~mask[row]] == float('-inf')).all())
    with pytest.raises(ValueError, match="'remove_tail'"):
        applied(graph, head, relation, targets=targets, remove_tail=head)
    with pytest.raises(ValueError, match='boolean mask of shape'):
        applied(graph, head, relation, targets=targets[:, :-1])


@pytest.mark.parametrize('L', [2, 3])
def test_paths_expanded_in_parts_score_as_expanded_whole(L, monkeypatch):
    # With at most 8 walks per part, most queries' states are split (a
    # state reached from several parts is one firing of its rules): the
    # same scores, with and without targets and without the queries' own
    # edges, under max-plus and noisy-or.
    data = random_kg(0, N=12, E=60)
    R, N = data.num_relations, data.num_nodes
    model = RuleReasoner(R, num_steps=L).eval()
    graph = resolve_graph(data, num_relations=R)
    head = torch.arange(0, N, 3).repeat(2 * R)
    relation = torch.arange(2 * R).repeat_interleave(head.numel() // (2 * R))
    tail = torch.randint(0, N, head.shape,
                         generator=torch.Generator().manual_seed(1))
    targets = torch.rand(head.numel(), N,
                         generator=torch.Generator().manual_seed(2)) < 0.4
    calls = [{}, {'targets': targets}, {'remove_tail': tail}]
    for aggregation, keys in (('max-plus', 3), ('noisy-or', 50)):
        applied = AppliedRules.mine(data, L, min_support=1, unseen=0.5,
                                    tie_break=model, aggregation=aggregation,
                                    num_keys=keys)
        whole = [applied(graph, head, relation, **c) for c in calls]
        with monkeypatch.context() as m:
            m.setattr(paths_module, 'MAX_WALKS', 8)
            parts = [applied(graph, head, relation, **c) for c in calls]
        for w, p in zip(whole, parts):
            assert torch.equal(w, p)


def test_the_firings_of_a_ranking_are_checked_against_the_memory(
        monkeypatch):
    # Each expansion step fits but the rules' firings gathered over the
    # steps do not: refused as they grow (a hub's paths, expanded in parts,
    # can reach every entity through many rules), naming the firings.
    import pyg_degreembed.training.budget as budget_module
    from pyg_degreembed.interpret import applied_rules as applied_module
    from pyg_degreembed.training.budget import ResourceError
    data = random_kg(0, N=12, E=60)
    R, N = data.num_relations, data.num_nodes
    graph = resolve_graph(data, num_relations=R)
    head = torch.arange(N).repeat(2 * R)
    relation = torch.arange(2 * R).repeat_interleave(N)
    applied = AppliedRules.mine(data, 3, min_support=1, constants=False)
    steps = []
    monkeypatch.setattr(paths_module, 'MAX_WALKS', 64)  # steps in parts
    monkeypatch.setattr(paths_module, 'check_memory',
                        lambda size, what: steps.append(size))
    (cells, _), _ = applied._firings(graph, head, relation, None)
    firings = applied_module.FIRING_BYTES * cells.numel()
    assert max(steps) < firings - 1
    monkeypatch.setattr(budget_module, 'available_memory',
                        lambda **_: firings - 1)
    with pytest.raises(ResourceError, match=r"The rules' [\d,]+ firings on "
                       f'{head.numel()} queries needs about'):
        applied(graph, head, relation)
    monkeypatch.setattr(budget_module, 'available_memory',
                        lambda **_: 2 * firings)
    applied(graph, head, relation)


@pytest.mark.parametrize('seed', [0, 1])
def test_shortened_rules_score_as_those_mined_shorter(seed):
    # The path rules of up to 3 edges cut at 1 or 2 edges are the rules
    # mined at that length (same counts, confidences and scores), and
    # score_with_unseen scores each cut as those rules do.
    data = random_kg(seed, N=12, E=60)
    R = data.num_relations
    torch.manual_seed(seed)
    model = RuleReasoner(R, num_steps=2).eval()
    longest = AppliedRules.mine(data, 3, min_support=1, unseen=0.5,
                                tie_break=model)
    P = longest._num_patterns
    assert longest.rule_length.tolist() == [
        len(pattern_of(int(key) % P, 2 * R)) for key in longest.rule_key]
    graph = resolve_graph(data, num_relations=R)
    head, relation, tail = train_queries(data)
    unseen = (0.5, 200.)
    cuts = (3, 1, 2)
    both = (('max-plus', 3), ('noisy-or', 5, 0.3))
    scores = longest.score_with_unseen(graph, head, relation, unseen,
                                       remove_tail=tail, aggregations=both,
                                       max_lengths=cuts)
    assert scores.shape[0] == len(unseen) * len(cuts) * len(both) + 1
    for got, (u, length, a) in zip(scores, itertools.product(unseen, cuts,
                                                             both)):
        mined = AppliedRules.mine(data, length, min_support=1, unseen=u,
                                  tie_break=model, aggregation=a[0],
                                  num_keys=a[1], model_weight=a[2]
                                  if len(a) > 2 else 0.)
        cut = AppliedRules.mine(data, 3, min_support=1, unseen=u,
                                tie_break=model, aggregation=a[0],
                                num_keys=a[1], model_weight=a[2]
                                if len(a) > 2 else 0.).shortened(length)
        assert cut.num_steps == length
        for name in ('rule_key', 'confidence', 'support', 'groundings'):
            assert torch.equal(getattr(cut, name), getattr(mined, name))
        want = mined(graph, head, relation, remove_tail=tail)
        assert torch.equal(cut(graph, head, relation, remove_tail=tail),
                           want)
        assert torch.equal(got, want)
    for bad in ((), (0, ), (4, )):
        with pytest.raises(ValueError, match='max_lengths'):
            longest.score_with_unseen(graph, head, relation, unseen,
                                      max_lengths=bad)
    with pytest.raises(ValueError, match='max_length'):
        longest.shortened(4)


def canonical_overlap(applied):
    # The overlap's pairs (smaller index first) and their Jaccard indices,
    # in the order of the pairs.
    pairs, jaccard = applied.overlap
    pairs = pairs.sort(dim=0).values
    order = torch.argsort(pairs[0] * applied.num_rules + pairs[1])
    return pairs[:, order], jaccard[order]


@pytest.mark.parametrize('seed', [0, 1])
def test_pruned_rules_are_those_mined_with_more_support(seed):
    # Rules (path and constant) mined with a support of at least 1, pruned
    # at 2 or 3, are the rules mined with that min_support from the same
    # counts: the same rules, confidences and scores, and the overlaps
    # measured between them.
    data = random_kg(seed, N=12, E=60)
    R = data.num_relations
    torch.manual_seed(seed)
    model = RuleReasoner(R, num_steps=2).eval()
    mined = mine_counts(data, 2, min_support=1)
    every = AppliedRules.mine(data, 2, min_support=1, unseen=0.5,
                              tie_break=model, counts=mined.counts,
                              constant_counts=mined.constant_counts,
                              aggregation='noisy-or', num_keys=5,
                              redundancy=0.3)
    graph = resolve_graph(data, num_relations=R)
    head, relation, tail = train_queries(data)
    sizes = [every.num_rules]
    for support in (2, 3):
        want = AppliedRules.mine(data, 2, min_support=support, unseen=0.5,
                                 tie_break=model, counts=mined.counts,
                                 constant_counts=mined.constant_counts,
                                 aggregation='noisy-or', num_keys=5,
                                 redundancy=0.3)
        got = every.pruned(support)
        sizes.append(got.num_rules)
        assert got.redundancy == 0.3
        for name in ('rule_key', 'confidence', 'support', 'groundings'):
            assert torch.equal(getattr(got, name), getattr(want, name))
        assert want.constant_rules is not None
        for name in ConstantRules.FIELDS:
            assert torch.equal(getattr(got.constant_rules, name),
                               getattr(want.constant_rules, name))
        for a, b in zip(canonical_overlap(got), canonical_overlap(want)):
            assert torch.equal(a, b)
        assert torch.equal(got(graph, head, relation, remove_tail=tail),
                           want(graph, head, relation, remove_tail=tail))
    assert sizes[0] > sizes[1] > sizes[2] > 0  # each prune removes some
    with pytest.raises(ValueError, match='min_support'):
        every.pruned(0)


@pytest.mark.parametrize('tolerance', [1., 0.01, -1.])
def test_the_choice_prunes_at_the_largest_support_validation_allows(
        monkeypatch, tolerance):
    # The prune keeps the rules at the largest support tried, from the
    # smallest on, until one whose validation MRR (of the rules, ranked
    # alone: compute_ranks) falls below the unpruned rules' by more than
    # the tolerance; the rules kept are those pruned().
    gen = torch.Generator().manual_seed(1)
    N, R, E = 25, 2, 400
    triples = torch.unique(torch.stack([
        torch.randint(0, N, (E, ), generator=gen),
        torch.randint(0, R, (E, ), generator=gen),
        torch.randint(0, N, (E, ), generator=gen)]), dim=1)
    triples = triples[:, torch.randperm(triples.size(1), generator=gen)]
    n = triples.size(1)
    facts, train, valid = triples[:, :n * 3 // 8], \
        triples[:, n * 3 // 8:n * 3 // 4], triples[:, n * 3 // 4:]
    data = from_edge_index(train[[0, 2]], train[1], num_nodes=N,
                           num_relations=R,
                           splits={'facts': facts, 'valid': valid})
    torch.manual_seed(0)
    model = RuleReasoner(R, num_steps=2).eval()
    monkeypatch.setattr(scorer_module, 'PRUNE_TOLERANCE', tolerance)
    supports = (3, 5, 8, 12)
    choice = choose_scorer(model, data, 2, scorer='rules', unseen=(5., ),
                           aggregations=(('max-plus', 3), ),
                           min_supports=supports)
    every = AppliedRules.mine(data, 2, tie_break=model, unseen=5.)
    full = compute_ranks(every, data, 'valid').metrics()['mrr']
    want = every
    for support in supports:
        pruned = every.pruned(support)
        if compute_ranks(pruned, data, 'valid').metrics()['mrr'] < \
                full - tolerance:
            break
        want = pruned
    assert choice.applied.num_rules == want.num_rules
    assert torch.equal(choice.applied.rule_key, want.rule_key)
    assert torch.equal(choice.applied.constant_rules.key,
                       want.constant_rules.key)
    assert choice.pruned.startswith('rules kept: ')
    if tolerance == 1.:  # every prune allowed: the largest
        assert choice.applied.num_rules == every.pruned(12).num_rules \
            < every.num_rules
    if tolerance == -1.:  # none allowed
        assert choice.applied.num_rules == every.num_rules
    if tolerance == 0.01:  # this KG: a prune is taken, not the last
        assert every.pruned(12).num_rules < choice.applied.num_rules \
            < every.num_rules


def test_the_choice_cuts_the_rules_where_shorter_rank_better(monkeypatch):
    # With rules of up to 3 edges, stage 2 ranks each (longest length,
    # aggregation), the full length first, as the rules mined at that
    # length alone; the one chosen (here forced: the last) is what the
    # choice keeps, the rules cut at its length.
    data = chain_kg()
    R = data.num_relations
    model = RuleReasoner(R, num_steps=2)
    pairs = (('max-plus', 3), ('noisy-or', 10))
    options = [(n, a) for n in (3, 2, 1) for a in pairs]
    picks = []

    def last(options):  # the preferred u, then the last setting
        picks.append(len(options))
        return 0 if len(picks) == 1 else len(options) - 1

    monkeypatch.setattr(scorer_module, 'preferred_choice', last)
    choice = choose_scorer(model, data, 3, scorer='rules', unseen=(5., ),
                           aggregations=pairs, max_lengths=(3, 2, 1))
    assert picks == [1, len(options), 1]  # then u for new graphs
    model_ranks = compute_ranks(model, data, 'valid')
    for got, (n, a) in zip(choice.aggregation_ranks, options):
        want = compute_ranks(AppliedRules.mine(
            data, n, tie_break=model, unseen=5., aggregation=a[0],
            num_keys=a[1]), data, 'valid')
        assert torch.equal(got.ranks['realistic'], want.ranks['realistic'])
    assert torch.equal(choice.aggregation_ranks[-1].ranks['realistic'],
                       model_ranks.ranks['realistic'])
    assert choice.applied.num_steps == 1
    assert choice.aggregation == Aggregation('noisy-or', 10)
    assert 'rules of <= 1 edges' in choice.reason
    one = AppliedRules.mine(data, 1, tie_break=model, unseen=5.,
                            aggregation='noisy-or', num_keys=10)
    assert torch.equal(choice.applied.rule_key, one.rule_key)
    assert torch.equal(choice.applied.confidence, one.confidence)
    # By default no cut: the rules of length <= L.
    monkeypatch.undo()
    default = choose_scorer(model, data, 3, scorer='rules', unseen=(5., ),
                            aggregations=pairs)
    assert len(default.aggregation_ranks) == len(pairs) + 1
    assert default.applied.num_steps == 3
    with pytest.raises(ValueError, match='max_lengths'):
        choose_scorer(model, data, 3, max_lengths=(4, ))
