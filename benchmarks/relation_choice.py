"""How the scorer is chosen per query relation, judged by two-fold validation.

    python benchmarks/relation_choice.py                    # every dataset
    python benchmarks/relation_choice.py --datasets wn18rr --budget 180
    python benchmarks/relation_choice.py --table-only

Per dataset (a KG of ``../shared/datasets`` or a GraIL split, e.g.
``fb237_v1``): the default command (``pyg-degreembed train --dataset X
--time-budget B``, seed 0) trains the model and chooses the rule length L;
the rules are mined again as the command mines them
(``interpret.mining.mine_counts`` at L, seed 0, within a third of the
budget) and ``training.scorer.choose_scorer`` ranks every validation triple
with the rules under each aggregation of ``AGGREGATION_CHOICES`` (at the u
it chooses) and with the model.  Ways to choose among those rankings:

* ``one_for_all``: the aggregation chosen for every query relation
  (``preferred_choice``), the model never alone;
* ``rules_or_model_k``: that aggregation or the model per query relation
  (``relation_choice`` with ``prior_queries=k``; the default, k = 10);
* ``any_k``: any aggregation or the model per query relation (SAFRAN's
  per-relation search of its aggregation's settings), prior k.

Each is judged by its two-fold validation MRR (realistic ties): the choice
made on one half of the validation triples, the MRR taken on the other, both
halves pooled, the mean over 10 seeded halvings.  Validation only: no test
triple is ranked.

Writes results/relation_choice.json (rows merged by dataset) and
results/relation_choice.md.
"""
import os
import tempfile

import torch
from applied_rules import two_fold_mrr
from common import SHARED, default_command, per_dataset_main

from pyg_degreembed import load_model
from pyg_degreembed.interpret.mining import mine_counts
from pyg_degreembed.training.checkpoint import load_checkpoint
from pyg_degreembed.training.scorer import (choose_scorer, preferred_choice,
                                            relation_choice)

DATASETS = ['family', 'kinship', 'umls', 'fb237_v1', 'WN18RR_v1']
PRIORS = (10, 30, 100)
HALVINGS = 10


def one_for_all(R):
    def choose(part):
        return torch.full((2 * R, ), preferred_choice(part[:-1]))
    return choose


def rules_or_model(R, k):
    def choose(part):
        best = preferred_choice(part[:-1])
        model = relation_choice([part[best], part[-1]], R, k) == 1
        return torch.where(model, len(part) - 1, best)
    return choose


def any_option(R, k):
    return lambda part: relation_choice(part, R, k)


def run(dataset: str, budget: float) -> dict:
    grail = os.path.isdir(os.path.join(SHARED, 'grail', dataset))
    name = os.path.join('grail', dataset) if grail else dataset
    with tempfile.TemporaryDirectory() as work:
        checkpoint = default_command(name, budget, work)[0]
        payload = load_checkpoint(checkpoint)
        model, data = load_model(checkpoint)
    L = payload['rules']['config']['num_steps']
    mined = mine_counts(data, L, time_limit=budget / 3)
    choice = choose_scorer(model, data, L, mined=mined)
    options = choice.aggregation_ranks  # each aggregation, then the model
    R = data.num_relations
    ways = {'one_for_all': one_for_all(R)}
    for k in PRIORS:
        ways[f'rules_or_model_{k}'] = rules_or_model(R, k)
    for k in PRIORS:
        ways[f'any_{k}'] = any_option(R, k)
    return {'dataset': dataset, 'num_steps': L, 'budget_seconds': budget,
            'mining': mined.description,
            'validation_triples': options[0].relation.numel() // 2,
            'option_mrr': [round(o.mrr(), 4) for o in options],
            'two_fold': {way: round(two_fold_mrr(options, choose, HALVINGS),
                                    4)
                         for way, choose in ways.items()}}


def table(rows) -> str:
    ways = list(rows[0]['two_fold'])
    lines = ['Two-fold validation MRR (realistic ties; the choice made on '
             'one half of the validation triples, taken on the other, mean '
             f'over {HALVINGS} halvings).', '',
             '| dataset (budget) | ' + ' | '.join(ways) + ' |',
             '|---|' + '---|' * len(ways)]
    for row in rows:
        lines.append(f"| {row['dataset']} ({row['budget_seconds']:g} s) | " +
                     ' | '.join(f"{row['two_fold'][w]:.4f}" for w in ways) +
                     ' |')
    means = [sum(row['two_fold'][w] for row in rows) / len(rows)
             for w in ways]
    lines.append('| mean | ' + ' | '.join(f'{m:.4f}' for m in means) + ' |')
    return '\n'.join(lines)


if __name__ == '__main__':
    per_dataset_main(__doc__, DATASETS, run, table, 'relation_choice.py')
