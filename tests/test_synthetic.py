r"""benchmarks/synthetic.py: a seeded KG with planted rules, and the recall
of the planted rules among a miner's best rules."""
import json
import os
import sys

import torch

from pyg_degreembed import AppliedRules, load_dataset

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'benchmarks'))
from synthetic import generate, planted_recall, write  # noqa: E402


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
