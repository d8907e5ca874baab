r"""benchmarks/synthetic.py: a seeded KG with planted rules, and the recall
of the planted rules among a miner's best rules."""
import json
import os
import sys

import torch

from pyg_degreembed import AppliedRules, load_dataset

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'benchmarks'))
from synthetic import (PLANTED_SHARE, generate, planted_recall,  # noqa
                       write)


def test_planted_rules_are_seeded_and_recovered(tmp_path):
    splits, planted = generate(6000, 600, 10, seed=1)
    again, same = generate(6000, 600, 10, seed=1)
    assert planted == same and all(torch.equal(splits[s], again[s])
                                   for s in splits)
    other, _ = generate(6000, 600, 10, seed=2)
    assert not torch.equal(splits['train'], other['train'])
    sizes = {s: t.size(1) for s, t in splits.items()}
    assert sizes['valid'] == sizes['test'] or \
        abs(sizes['valid'] - sizes['test']) <= 1
    assert sizes['train'] > 8 * sizes['test']
    # Two planted path rules (lengths 1 and 2) and 5 constant rules.
    paths = [r for r in planted if not r.get('constant')]
    assert [len(r['body']) for r in paths] == [1, 2]
    assert sum(bool(r.get('constant')) for r in planted) == 5
    write(str(tmp_path / 'syn'), splits, planted, 10)
    data = load_dataset(str(tmp_path / 'syn'))
    with open(tmp_path / 'syn' / 'planted.json') as f:
        named = json.load(f)
    applied = AppliedRules.mine(data, 2)
    assert planted_recall(applied, data, named, k=10) == 1.0
    # A miner that saw no rules recalls none.
    assert planted_recall(AppliedRules.mine(data, 1, constants=False), data,
                          named, k=10) < 1.0


def test_planted_rules_have_the_stated_confidence():
    # Measured on the whole generated KG with dense boolean matrices (an
    # independent reference for the generator's body pairs): the share of
    # the pairs a body joins that are triples of its head, within 4
    # binomial standard deviations of the stated probability.
    N = 800
    splits, planted = generate(20000, N, 10, seed=3)
    triples = torch.cat(list(splits.values()), dim=1)

    def matrix(relation):
        m = torch.zeros(N, N, dtype=torch.bool)
        keep = triples[1] == relation
        m[triples[0, keep], triples[2, keep]] = True
        return m

    for rule in planted:
        head = matrix(rule['head'])
        if rule.get('constant'):
            has_body = matrix(rule['body'][0]).any(1)
            support = int(head[has_body, rule['answer']].sum())
            groundings = int(has_body.sum())
            p = 0.8
        else:
            joined = matrix(rule['body'][0])
            for b in rule['body'][1:]:
                joined = (joined.float() @ matrix(b).float()) > 0
            joined.fill_diagonal_(False)
            support = int((joined & head).sum())
            groundings = int(joined.sum())
            p = rule['probability']
            # Most of the head's triples come from the body (10 % noise),
            # and the head has about its share of the triples.
            assert support >= 0.85 * int(head.sum())
            share = PLANTED_SHARE * 20000 / 2
            assert 0.7 * share < int(head.sum()) < 1.3 * share
        assert groundings > 100
        sd = (p * (1 - p) / groundings) ** 0.5
        assert abs(support / groundings - p) < 4 * sd + 0.005, rule
