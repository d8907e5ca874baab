import itertools
from collections import defaultdict

import torch

from pyg_degreembed import RuleReasoner, extract_rules
from pyg_degreembed.rules import Rule, rule_confidence


def brute_force(attention):
    r"""Confidence of every rule by enumerating all (K+1)^L paths."""
    T, L, K1 = attention.shape
    out = defaultdict(float)
    for path in itertools.product(range(K1), repeat=L):
        body = tuple(o for o in path if o != K1 - 1)
        if body:
            out[body] += float(sum(
                torch.prod(attention[j, torch.arange(L), torch.tensor(path)])
                for j in range(T)))
    return out


def test_rule_confidence_merges_identity_paddings():
    torch.manual_seed(0)
    attention = torch.rand(2, 3, 5).softmax(-1)
    expected = brute_force(attention)
    for body, value in expected.items():
        assert abs(rule_confidence(attention, body) - value) < 1e-6


def test_extract_rules_equals_brute_force_ranking():
    torch.manual_seed(0)
    model = RuleReasoner(2, num_steps=3, rank=2, embedding_dim=8,
                         hidden_channels=8)
    relation = 1
    attention = model.operator_attention(torch.tensor([relation]))[0]
    expected = sorted(brute_force(attention.detach()).items(),
                      key=lambda item: -item[1])
    best = expected[0][1]
    rules = extract_rules(model, relation, k=5, confidence='attention',
                          beam_width=125)
    assert [r.body for r in rules] == [body for body, _ in expected[:5]]
    for rule, (_, value) in zip(rules, expected):
        assert abs(rule.confidence - value / best) < 1e-5
        assert rule.head == relation
    # The default (narrow) beam reports exact confidences too.
    for rule in extract_rules(model, relation, k=3,
                              confidence='attention'):
        exact = dict(expected)[rule.body] / best
        assert abs(rule.confidence - exact) < 1e-5


def test_rule_text_swaps_arguments_of_inverse_relations():
    names = ['brother', 'sister', 'father']
    rule = Rule(head=0, body=(1, 3), confidence=0.8123)
    assert rule.format(names) == \
        'brother(X,Y) <= sister(X,Z), brother(Y,Z)  0.81'
    assert Rule(head=5, body=(2, ), confidence=1.).format(names) == \
        'father(Y,X) <= father(X,Y)  1.00'
    assert Rule(head=2, body=(0, 1, 5), confidence=.5).format(names) == \
        'father(X,Y) <= brother(X,Z1), sister(Z1,Z2), father(Y,Z2)  0.50'
