"""Rules and model combined instead of chosen: a measurement for the
accuracy issue (not yet a scorer of the package).

    python benchmarks/combination.py [--datasets family kinship umls]
        [--time-budget 120] [--steps 2] [--output combination.json]

Per dataset: the default command (``pyg-degreembed train --dataset X
--time-budget B``) trains the model and records its test MRR (the
per-relation choice between the rules and the model); then, with that
model, every candidate :math:`y` of :math:`(h, q, ?)` is scored

.. math::
    1 - (1 - \\mathrm{noisy}_k(h, q, y)) \\,
    (1 - \\min(1, \\alpha\\, s(h, q, y) / \\max_{y'} s(h, q, y'))),

the noisy-or of the confidences of its :math:`k` best applied rules (u =
200, constant rules included; :math:`k = 1` is the best rule alone) and of
the model's score scaled to the query's best, as one more piece of evidence
of weight :math:`\\alpha`; ties by the best rule.  Filtered validation and
test MRR (realistic ties) for :math:`k \\in \\{1, 3, 50\\}` and
:math:`\\alpha \\in \\{0, 0.1, 0.3, 0.5, 1\\}`, and the test MRR of the pair
with the best validation MRR.  Writes ``results/combination.json``.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch

from common import SHARED, load_benchmark, machine, write_json
from pyg_degreembed import AppliedRules, compute_ranks, load_model
from pyg_degreembed.data.resolve import resolve_graph
from pyg_degreembed.interpret.applied_rules import rule_counts
from pyg_degreembed.interpret.constant_rules import constant_rule_counts

KEYS = (1, 3, 50)
ALPHAS = (0., 0.1, 0.3, 0.5, 1.)


class RulesAndModel(torch.nn.Module):
    r"""The combined score above (a measurement device)."""
    def __init__(self, rules: AppliedRules, model, alpha: float):
        super().__init__()
        self.rules, self.model, self.alpha = rules, model, alpha
        self.num_relations = rules.num_relations

    @torch.no_grad()
    def forward(self, graph, head, relation, remove_tail=None):
        graph = resolve_graph(graph, num_relations=self.num_relations)
        extra = {} if remove_tail is None else {'remove_tail': remove_tail}
        keys = self.rules.rule_keys(graph, head, relation, **extra)
        noisy = 1. - (1. - keys).prod(dim=-1)
        score = self.model(graph, head, relation, **extra).double()
        scaled = score / score.max(dim=-1, keepdim=True).values.clamp(
            min=1e-12)
        combined = 1. - (1. - noisy) * (1. - (self.alpha * scaled).clamp(
            max=1.))
        return combined + 1e-9 * keys[..., 0]


def trained(name: str, budget: float, work: str):
    # The default command's model and test MRR.
    checkpoint = os.path.join(work, 'run.pt')
    subprocess.run([sys.executable, '-m', 'pyg_degreembed.cli', 'train',
                    '--dataset', os.path.join(SHARED, name),
                    '--time-budget', str(budget), '--checkpoint', checkpoint,
                    '--no-progress'], capture_output=True, check=True)
    with open(os.path.join(work, 'run.json')) as f:
        default = json.load(f)['metrics']['realistic']['mrr']
    return checkpoint, default


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--datasets', nargs='+',
                        default=['family', 'kinship', 'umls'])
    parser.add_argument('--time-budget', type=float, default=120.)
    parser.add_argument('--steps', type=int, default=2)
    parser.add_argument('--output', default='combination.json',
                        help='the file written in results/')
    args = parser.parse_args()
    rows = []
    for name in args.datasets:
        kg = load_benchmark(name)
        with tempfile.TemporaryDirectory() as work:
            checkpoint, default = trained(name, args.time_budget, work)
            model = load_model(checkpoint, kg)[0].eval()
        counts = rule_counts(kg, args.steps)
        constants = constant_rule_counts(kg)
        grid = []
        for keys in KEYS:
            rules = AppliedRules.mine(
                kg, args.steps, num_keys=keys, counts=counts,
                constant_counts=constants, aggregation='noisy-or')
            for alpha in ALPHAS:
                scorer = RulesAndModel(rules, model, alpha)
                cell = {'keys': keys, 'alpha': alpha}
                for split in ('valid', 'test'):
                    cell[f'{split}_mrr'] = round(compute_ranks(
                        scorer, kg, split).metrics()['mrr'], 4)
                print(name, json.dumps(cell), flush=True)
                grid.append(cell)
        best = max(grid, key=lambda c: c['valid_mrr'])
        rows.append({'dataset': name, 'num_steps': args.steps,
                     'time_budget': args.time_budget,
                     'default_test_mrr': round(default, 4),
                     'chosen_on_valid': best, 'grid': grid})
        print(json.dumps(rows[-1]['chosen_on_valid']), 'default',
              rows[-1]['default_test_mrr'])
    print(write_json(args.output, {'rows': rows, 'machine': machine()}))


if __name__ == '__main__':
    main()
