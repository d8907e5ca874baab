import pytest
import torch

from pyg_degreembed import RuleReasoner, extract_rules
from pyg_degreembed.interpret.rules import Rule, rule_confidence

from conftest import attention_rule_masses as brute_force
from conftest import brute_force_attention_rules


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


@pytest.mark.parametrize('num_steps', [2, 3])
def test_attention_rules_exact_and_by_beam_search(num_steps, monkeypatch):
    import pyg_degreembed.interpret.rules
    torch.manual_seed(0)
    model = RuleReasoner(3, num_steps=num_steps, rank=3, embedding_dim=8,
                         hidden_channels=8)
    expected = brute_force_attention_rules(model, 4, 6)
    exact = extract_rules(model, 4, k=6, confidence='attention')
    assert [(r.body, r.confidence) for r in exact] == [
        (body, pytest.approx(value)) for body, value in expected]
    # A beam as wide as all paths finds the same; a narrow one may not,
    # but scores what it finds exactly.
    monkeypatch.setattr(pyg_degreembed.interpret.rules, 'EXACT_PATHS', 0)
    wide = extract_rules(model, 4, k=6, confidence='attention',
                         beam_width=7**num_steps)
    assert [(r.body, r.confidence) for r in wide] == [
        (r.body, pytest.approx(r.confidence)) for r in exact]
    narrow = extract_rules(model, 4, k=6, confidence='attention',
                           beam_width=2)
    assert {r.body for r in narrow} <= {body for body, _ in
                                        brute_force_attention_rules(
                                            model, 4, 7**num_steps)}
